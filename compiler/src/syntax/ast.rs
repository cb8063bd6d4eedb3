//! The abstract syntax tree of a `.charter` file: plain values with a span on every node.
//!
//! The AST holds what the author wrote and nothing that is worked out later: names are
//! not resolved here (the checker's tables do that) and the compiled graph has its own
//! types. Every node that can be pointed at by a diagnostic carries a [`Span`].

use crate::diagnostics::Span;

/// A name as written, with where it was written.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Ident {
    pub name: String,
    pub span: Span,
}

/// A string literal after escapes were processed (and, for `"""` blocks, after the
/// common indentation was stripped).
#[derive(Clone, Debug, PartialEq)]
pub struct StringLit {
    pub value: String,
    pub span: Span,
}

/// A number literal. `is_integer` is true when it was written without a `.` or exponent.
#[derive(Clone, Debug, PartialEq)]
pub struct NumberLit {
    pub value: f64,
    pub is_integer: bool,
    /// The exact value when `is_integer` and it fits an `i64` (`value` is rounded through
    /// `f64` above 2^53); `None` for a non-integer or an integer too large for 64 bits.
    pub int: Option<i64>,
    pub span: Span,
}

/// A non-negative integer literal (counts: rounds, retries, concurrency, ...).
#[derive(Clone, Debug, PartialEq)]
pub struct IntLit {
    pub value: u64,
    pub span: Span,
}

/// A duration literal such as `250ms`, `30s`, `15m`, `2h`, in milliseconds.
#[derive(Clone, Debug, PartialEq)]
pub struct DurationLit {
    pub millis: u64,
    pub span: Span,
}

/// One parsed `.charter` file.
#[derive(Clone, Debug, PartialEq)]
pub struct SpecFile {
    /// `spec NAME version "X"`.
    pub name: Ident,
    pub version: StringLit,
    /// The optional `"""..."""` doc block after the header.
    pub doc: Option<StringLit>,
    pub items: Vec<Item>,
    pub span: Span,
    /// Every file the roles' prompt templates include (`{% include "x" %}`), read while
    /// parsing like a `file(...)` prompt, by its template name (its path relative to the
    /// spec's directory, [`crate::render_env::include_path`]): the file, or why it could
    /// not be read (reported by the template check where the tag is, E016).
    pub includes: std::collections::BTreeMap<String, Result<crate::diagnostics::FileId, String>>,
}

#[derive(Clone, Debug, PartialEq)]
pub enum Item {
    /// `import role "roles/x.md"`: the role file is read and parsed during parsing, so the
    /// imported role is available as `role` (absent when the file could not be read or parsed;
    /// the problem was already reported).
    Import(Import),
    Models(ModelsBlock),
    Rules(RulesBlock),
    Contract(Contract),
    Tool(Tool),
    /// `mcp NAME { ... }`: an MCP server whose tools roles name `NAME.TOOL` (DESIGN §19).
    Mcp(McpServer),
    Role(Role),
    Gate(Gate),
    Repair(Repair),
    Invariant(Invariant),
    Budget(Budget),
    /// `session NAME keep N { fields }` (DESIGN §9.4).
    Session(Session),
    /// `remember FIELD = EXPR`.
    Remember(Remember),
    Flow(Flow),
}

#[derive(Clone, Debug, PartialEq)]
pub struct Import {
    pub path: StringLit,
    pub role: Option<Role>,
    /// `import role "x.md" { permit TOOL when EXPR }`: rules the spec adds to the role
    /// (already added to `role.permits`; kept here for their spans).
    pub permits: Vec<Permit>,
    pub span: Span,
}

/// `session NAME keep N { field* }`: the fields are a contract named NAME.
#[derive(Clone, Debug, PartialEq)]
pub struct Session {
    pub contract: Contract,
    pub keep: Option<IntLit>,
    pub span: Span,
}

/// `remember FIELD = EXPR`
#[derive(Clone, Debug, PartialEq)]
pub struct Remember {
    pub field: Ident,
    pub value: Expr,
    pub span: Span,
}

/// `models { alias = "provider:model" price IN / OUT ... }`
#[derive(Clone, Debug, PartialEq)]
pub struct ModelsBlock {
    pub entries: Vec<ModelEntry>,
    pub span: Span,
}

#[derive(Clone, Debug, PartialEq)]
pub struct ModelEntry {
    pub alias: Ident,
    /// `"<provider>:<model>"`.
    pub target: StringLit,
    /// USD per one million input and output tokens.
    pub price: Option<Price>,
    /// `temperature 0.2 top_p 0.9 max_tokens 800 seed 7 output json_object`, as written.
    pub params: Vec<ModelParam>,
    pub span: Span,
}

/// One parameter of a `models` entry.
#[derive(Clone, Debug, PartialEq)]
pub enum ModelParam {
    Temperature(NumberLit),
    TopP(NumberLit),
    MaxTokens(IntLit),
    Seed(IntLit),
    /// `idle_timeout D`: no byte from the server for D is a timeout (DESIGN §15).
    IdleTimeout(DurationLit),
    Output(OutputMode, Span),
}

/// How a model is asked for output that matches the role's contract.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OutputMode {
    JsonSchema,
    JsonObject,
    Prompt,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Price {
    pub input: NumberLit,
    pub output: NumberLit,
    pub span: Span,
}

/// `rules NAME version "X" { "line" ... }`
#[derive(Clone, Debug, PartialEq)]
pub struct RulesBlock {
    pub name: Ident,
    pub version: Option<StringLit>,
    pub lines: Vec<StringLit>,
    pub span: Span,
}

/// `contract Name { field: type = default ... }`
#[derive(Clone, Debug, PartialEq)]
pub struct Contract {
    pub name: Ident,
    pub fields: Vec<Field>,
    pub span: Span,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Field {
    pub name: Ident,
    pub ty: TypeExpr,
    /// A literal default (`= []`, `= "x"`, `= 3`, `= none`).
    pub default: Option<Expr>,
    pub span: Span,
}

#[derive(Clone, Debug, PartialEq)]
pub struct TypeExpr {
    pub kind: TypeKind,
    /// Written with a trailing `?`.
    pub optional: bool,
    pub span: Span,
}

#[derive(Clone, Debug, PartialEq)]
pub enum TypeKind {
    String,
    Bool,
    Int(Option<RangeLit>),
    Float(Option<RangeLit>),
    List(Box<TypeExpr>, Option<RangeLit>),
    /// `A | B | C`: two or more variants, written as bare names (any case).
    Enum(Vec<Ident>),
    /// A contract name.
    Named(Ident),
}

/// `(min..=max)`, `(min..)`, `(..=max)`, `(min..max)` (the last is rejected by the checker
/// with E013, but it is parsed so the message can point at it).
#[derive(Clone, Debug, PartialEq)]
pub struct RangeLit {
    pub min: Option<NumberLit>,
    pub max: Option<NumberLit>,
    /// `..=` rather than `..`.
    pub inclusive: bool,
    pub span: Span,
}

/// `tool NAME { input: T output: T effect: read|write|external timeout: D retry: N sandbox { ... } }`
#[derive(Clone, Debug, PartialEq)]
pub struct Tool {
    pub name: Ident,
    pub input: Option<Ident>,
    pub output: Option<Ident>,
    pub effect: Option<EffectLit>,
    /// `timeout: D`: bounds one call of the tool (DESIGN §9.2).
    pub timeout: Option<DurationLit>,
    /// `retry: N (backoff D)?`: re-runs of a call that failed or timed out.
    pub retry: Option<Retry>,
    /// `sandbox { ... }` or `sandbox: required`: what the tool may reach beyond the
    /// default sandbox (DESIGN §20).
    pub sandbox: Option<Sandbox>,
    pub span: Span,
}

/// `mcp NAME { command: [...] | url: "..."  headers: {...}  env: {...}  tools: [...] | *
/// timeout: D  retry: N backoff D  sandbox { ... } }`, as written: a key not written is
/// `None`. Which keys go together is the checker's business (`check::mcp`).
#[derive(Clone, Debug, PartialEq)]
pub struct McpServer {
    pub name: Ident,
    /// `command: ["npx", "pkg", "arg"]`: the program and its arguments (stdio).
    pub command: Option<McpCommand>,
    /// `url: "http://..."`: the server's streamable HTTP endpoint.
    pub url: Option<McpUrl>,
    /// `headers: { Name: "text" | env("VAR") }`: sent with every request to a `url`.
    pub headers: Option<SecretMap>,
    /// `env: { NAME: "text" | env("VAR") }`: the environment of a started server.
    pub env: Option<SecretMap>,
    /// `tools: [a, b]` or `tools: *`: the tools the spec may use from the server.
    pub tools: Option<McpTools>,
    /// `timeout: D`: bounds one call of one of its tools.
    pub timeout: Option<DurationLit>,
    /// `retry: N (backoff D)?`: re-runs of a call that failed or timed out.
    pub retry: Option<Retry>,
    /// `sandbox { ... }` / `sandbox: required`: what a started server may reach, as on a
    /// `tool` (DESIGN §20).
    pub sandbox: Option<Sandbox>,
    pub span: Span,
}

/// `command: [...]`: the argv as written, and where the property is.
#[derive(Clone, Debug, PartialEq)]
pub struct McpCommand {
    pub argv: Vec<StringLit>,
    pub span: Span,
}

/// `url: "..."`: the address as written, and where the property is.
#[derive(Clone, Debug, PartialEq)]
pub struct McpUrl {
    pub url: StringLit,
    pub span: Span,
}

/// `headers: { ... }` or `env: { ... }`: entries in source order, and where the property is.
#[derive(Clone, Debug, PartialEq)]
pub struct SecretMap {
    pub entries: Vec<SecretEntry>,
    pub span: Span,
}

/// `NAME: "text"` or `NAME: env("VAR")`.
#[derive(Clone, Debug, PartialEq)]
pub struct SecretEntry {
    pub name: Ident,
    pub value: SecretValue,
    pub span: Span,
}

/// A value given as text, or read from Charter's environment when it is used.
#[derive(Clone, Debug, PartialEq)]
pub enum SecretValue {
    Text(StringLit),
    /// `env("VAR")`: the variable's name (the string's span), never its value.
    Env(StringLit),
}

/// `tools: [a, b]` (`only` holds them) or `tools: *` (`only` is `None`).
#[derive(Clone, Debug, PartialEq)]
pub struct McpTools {
    pub only: Option<Vec<Ident>>,
    pub span: Span,
}

/// A tool's `sandbox` block, as written; `sandbox: required` is a block with only
/// `required: true`. A key not written is `None` (empty for `env`).
#[derive(Clone, Debug, PartialEq)]
pub struct Sandbox {
    /// `read: ["data/", "~/.cache/x"]`: more paths the tool may read.
    pub read: Option<SandboxPaths>,
    /// `write: ["out/"]`: more paths the tool may write.
    pub write: Option<SandboxPaths>,
    /// `network: none | loopback | any`.
    pub network: Option<NetworkLit>,
    /// `env: [GITHUB_TOKEN]`: variables passed through from Charter's environment.
    pub env: Vec<Ident>,
    /// `processes: N`: how many processes the tool may have at once.
    pub processes: Option<IntLit>,
    /// `required: true` (or `sandbox: required`): no sandbox is an error, not a warning.
    pub required: Option<BoolLit>,
    pub span: Span,
}

/// A `read:` or `write:` list of a sandbox: the paths as written, and where the key is.
#[derive(Clone, Debug, PartialEq)]
pub struct SandboxPaths {
    pub paths: Vec<StringLit>,
    pub span: Span,
}

/// What a sandboxed tool may connect to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Network {
    /// No network at all (the default).
    None,
    /// Only the machine itself (`127.0.0.1`, `::1`).
    Loopback,
    /// Any address.
    Any,
}

#[derive(Clone, Debug, PartialEq)]
pub struct NetworkLit {
    pub network: Network,
    pub span: Span,
}

/// `true` or `false`, where it was written.
#[derive(Clone, Debug, PartialEq)]
pub struct BoolLit {
    pub value: bool,
    pub span: Span,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Effect {
    Read,
    Write,
    External,
}

#[derive(Clone, Debug, PartialEq)]
pub struct EffectLit {
    pub effect: Effect,
    pub span: Span,
}

/// Where a role was defined.
#[derive(Clone, Debug, PartialEq)]
pub enum RoleOrigin {
    /// A `role NAME { ... }` block in the spec.
    Block,
    /// A Markdown role file brought in by `import role "path"`.
    File { path: String },
}

/// A role: a `role` block or an imported role file, checked the same way.
/// Properties the author did not write are `None` / empty.
#[derive(Clone, Debug, PartialEq)]
pub struct Role {
    pub name: Ident,
    pub origin: RoleOrigin,
    pub model: Option<ModelRef>,
    pub prompt: Option<Prompt>,
    pub rules: Vec<Ident>,
    pub inputs: Vec<Ident>,
    pub output: Option<Ident>,
    /// The tools it may call: a `tool`'s name, or `SERVER.TOOL` (one [`Ident`] whose name
    /// holds the dot) for a tool of an `mcp` server.
    pub tools: Vec<Ident>,
    pub max_tool_calls: Option<IntLit>,
    pub timeout: Option<DurationLit>,
    pub retry: Option<Retry>,
    /// `history: [steps] last N`: earlier outputs of these steps reach the template.
    pub history: Option<History>,
    /// `permit TOOL when EXPR` rules, in source order (DESIGN §9.2).
    pub permits: Vec<Permit>,
    /// `tool_choice: auto | required | TOOL`.
    pub tool_choice: Option<Ident>,
    /// `retry_after_effects: true`: a provider retry may repeat `write`/`external` tools.
    pub retry_after_effects: Option<bool>,
    /// Role files only: the human-readable `name` and `description` from the front matter.
    pub display_name: Option<StringLit>,
    pub description: Option<StringLit>,
    /// Role files only: per-tool usage notes rendered into the prompt (`tool_rules`).
    pub tool_rules: Vec<ToolRule>,
    /// Role files only: front-matter keys Charter does not know, as `meta.KEY` (DESIGN
    /// §9.2), each with the span of its key.
    pub meta: Vec<MetaEntry>,
    /// Role files only: the `id` as written when it is not an identifier itself
    /// (`exp-master`, which the spec names `exp_master`); `role_named` finds it too.
    pub written_id: Option<StringLit>,
    /// `messages: chat` (the prompt is a system message, then the session's turns and the
    /// current message as a conversation), in a role file or a role block; `None` and
    /// `prompt` are one user message.
    pub messages: Option<Ident>,
    /// Role files only: which contracts the role takes by default because its front matter
    /// leaves them out (`input` is `Request`, `output` is `Reply`).
    pub implied: ImpliedContracts,
    pub span: Span,
}

impl Role {
    /// A role with only its name, origin and span filled in.
    pub(crate) fn empty(name: Ident, origin: RoleOrigin, span: Span) -> Role {
        Role {
            name,
            origin,
            model: None,
            prompt: None,
            rules: Vec::new(),
            inputs: Vec::new(),
            output: None,
            tools: Vec::new(),
            max_tool_calls: None,
            timeout: None,
            retry: None,
            history: None,
            permits: Vec::new(),
            meta: Vec::new(),
            tool_choice: None,
            retry_after_effects: None,
            display_name: None,
            description: None,
            tool_rules: Vec::new(),
            written_id: None,
            messages: None,
            implied: ImpliedContracts::default(),
            span,
        }
    }
}

/// Which of a role file's contracts were left out and defaulted (DESIGN §2.3).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ImpliedContracts {
    pub input: bool,
    pub output: bool,
}

/// A role file's own front-matter key and its value (as JSON).
#[derive(Clone, Debug, PartialEq)]
pub struct MetaEntry {
    pub key: String,
    pub value: serde_json::Value,
    pub span: Span,
}

/// `permit TOOL when EXPR`: a call of `tool` is made only when `condition` holds, with
/// `args` (the call's arguments) and `meta` (the role file's own keys) in scope.
#[derive(Clone, Debug, PartialEq)]
pub struct Permit {
    pub tool: Ident,
    pub condition: Expr,
    pub span: Span,
}

/// `history: [steps] last N` (DESIGN §8.3).
#[derive(Clone, Debug, PartialEq)]
pub struct History {
    pub steps: Vec<Ident>,
    pub last: Option<IntLit>,
    pub span: Span,
}

#[derive(Clone, Debug, PartialEq)]
pub struct ToolRule {
    pub tool: Ident,
    pub note: StringLit,
}

#[derive(Clone, Debug, PartialEq)]
pub enum ModelRef {
    /// An alias from the `models` block.
    Alias(Ident),
    /// A literal `"provider:model"`.
    Literal(StringLit),
}

#[derive(Clone, Debug, PartialEq)]
pub struct Prompt {
    pub source: PromptSource,
    pub span: Span,
}

#[derive(Clone, Debug, PartialEq)]
pub enum PromptSource {
    /// An inline `"""..."""` (or plain string) template, in the spec's own file.
    Inline(StringLit),
    /// `file("path")`: the template text was read through the loader during parsing and
    /// registered in the source map as `file` (absent when it could not be read; that was
    /// reported). For a role file, the Markdown body is the template and `path` is the role
    /// file itself.
    File {
        path: StringLit,
        file: Option<crate::diagnostics::FileId>,
    },
}

#[derive(Clone, Debug, PartialEq)]
pub struct Retry {
    pub count: IntLit,
    pub backoff: Option<DurationLit>,
    pub span: Span,
}

/// `gate NAME on STEP { rules... pass when EXPR }`
#[derive(Clone, Debug, PartialEq)]
pub struct Gate {
    pub name: Ident,
    pub subject: Ident,
    pub rules: Vec<GateRule>,
    pub pass_when: Expr,
    pub span: Span,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Severity {
    Hard,
    Warn,
}

#[derive(Clone, Debug, PartialEq)]
pub enum GateRule {
    /// `hard|warn NAME: EXPR else CODE (detail EXPR)?`
    Check {
        severity: Severity,
        name: Ident,
        expr: Expr,
        code: Ident,
        detail: Option<Expr>,
        span: Span,
    },
    /// `score NAME weight W: EXPR (below T CODE (detail EXPR)?)?`
    Score {
        name: Ident,
        weight: NumberLit,
        expr: Expr,
        below: Option<(NumberLit, Ident)>,
        /// The `detail` of the `below` issue.
        detail: Option<Expr>,
        span: Span,
    },
}

/// `repair { rounds N no_progress M  CODES -> action ... _ -> action }`
#[derive(Clone, Debug, PartialEq)]
pub struct Repair {
    pub rounds: IntLit,
    pub no_progress: Option<IntLit>,
    pub arms: Vec<RepairArm>,
    pub span: Span,
}

#[derive(Clone, Debug, PartialEq)]
pub struct RepairArm {
    pub pattern: RepairPattern,
    pub action: Action,
    pub span: Span,
}

#[derive(Clone, Debug, PartialEq)]
pub enum RepairPattern {
    Codes(Vec<Ident>),
    /// `_`
    Wildcard(Span),
}

#[derive(Clone, Debug, PartialEq)]
pub enum Action {
    Rerun {
        step: Ident,
        with_feedback: bool,
        span: Span,
    },
    Replan(Span),
    Accept(Span),
    Block(StringLit),
    Fail(StringLit),
    Ask(StringLit),
}

/// `invariant NAME: ...`
#[derive(Clone, Debug, PartialEq)]
pub struct Invariant {
    pub name: Ident,
    pub kind: InvariantKind,
    pub span: Span,
}

#[derive(Clone, Debug, PartialEq)]
pub enum InvariantKind {
    /// `ROLE has no tools`
    HasNoTools { role: Ident },
    /// `only ROLE uses TOOL`
    OnlyUses { role: Ident, tool: Ident },
    /// `always EXPR`
    Always(Expr),
}

/// `budget { tokens N cost X wall D steps N }`
#[derive(Clone, Debug, PartialEq)]
pub struct Budget {
    pub tokens: Option<IntLit>,
    pub cost: Option<NumberLit>,
    pub wall: Option<DurationLit>,
    pub steps: Option<IntLit>,
    /// `on_exhausted STEP`: the step that runs once when a budget runs out.
    pub on_exhausted: Option<Ident>,
    pub span: Span,
}

/// `flow { step* }`
#[derive(Clone, Debug, PartialEq)]
pub struct Flow {
    pub steps: Vec<Step>,
    pub span: Span,
}

/// `NAME = body next`
#[derive(Clone, Debug, PartialEq)]
pub struct Step {
    pub name: Ident,
    pub body: StepBody,
    pub next: Next,
    /// `on_error -> STEP`: the step the run goes to when this one fails.
    pub on_error: Option<Ident>,
    pub span: Span,
}

// A flow has few steps, so the size of the `each` variant costs nothing worth boxing for.
#[allow(clippy::large_enum_variant)]
#[derive(Clone, Debug, PartialEq)]
pub enum StepBody {
    /// `role(args)`
    Call { role: Ident, args: Vec<Expr> },
    /// `each VAR in PATH: role(args) concurrency N check GATE by ROLE retries N`
    Each {
        var: Ident,
        over: Expr,
        role: Ident,
        args: Vec<Expr>,
        concurrency: Option<IntLit>,
        check: Option<ItemCheck>,
    },
    /// `gate NAME`
    Gate { gate: Ident },
    /// `finalize role(args)`
    Finalize { role: Ident, args: Vec<Expr> },
    /// `branch`: no call; only its `when`/`else` transitions.
    Branch,
    /// `tool NAME(args)`: calls a tool directly, no model (DESIGN §9.1).
    Tool { tool: Ident, args: Vec<Expr> },
    /// `ask "question" (max N)?`
    Ask {
        question: StringLit,
        max: Option<IntLit>,
    },
}

/// The per-item check of an `each` step.
#[derive(Clone, Debug, PartialEq)]
pub struct ItemCheck {
    pub gate: Ident,
    pub by: Option<Ident>,
    pub retries: Option<IntLit>,
    pub span: Span,
}

#[derive(Clone, Debug, PartialEq)]
pub enum Next {
    /// `-> target`
    Goto(Target),
    /// `when EXPR -> target ... else -> target`
    When {
        arms: Vec<(Expr, Target)>,
        otherwise: Option<Target>,
    },
    /// `pass -> target fail -> target|repair`
    PassFail { pass: Target, fail: FailTarget },
}

#[derive(Clone, Debug, PartialEq)]
pub enum FailTarget {
    Target(Target),
    /// `fail -> repair`
    Repair(Span),
}

#[derive(Clone, Debug, PartialEq)]
pub enum Target {
    Step(Ident),
    Done(Span),
    Blocked(StringLit),
    Failed(StringLit),
}

impl Target {
    pub fn span(&self) -> Span {
        match self {
            Target::Step(ident) => ident.span,
            Target::Done(span) => *span,
            Target::Blocked(lit) | Target::Failed(lit) => lit.span,
        }
    }
}

/// An expression with its span.
#[derive(Clone, Debug, PartialEq)]
pub struct Expr {
    pub kind: ExprKind,
    pub span: Span,
}

#[derive(Clone, Debug, PartialEq)]
pub enum ExprKind {
    Bool(bool),
    Int(i64),
    Float(f64),
    Str(String),
    None,
    List(Vec<Expr>),
    /// `{ key: expr, ... }`: a record literal (used for static work-item lists, whose
    /// `id`/`depends_on` the compiler checks, E015).
    Record(Vec<(Ident, Expr)>),
    /// `a.b.c`; a single bare name may also be an enum variant, which the checker decides
    /// from the expected type.
    Path(Vec<Ident>),
    Unary {
        op: UnaryOp,
        operand: Box<Expr>,
    },
    Binary {
        op: BinaryOp,
        lhs: Box<Expr>,
        rhs: Box<Expr>,
    },
    /// A built-in function call: `len contains matches sum min max`.
    Call {
        function: Ident,
        args: Vec<Expr>,
    },
    /// `every|some|count VAR in OVER: BODY`
    Quantifier {
        kind: QuantifierKind,
        var: Ident,
        over: Box<Expr>,
        body: Box<Expr>,
    },
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum UnaryOp {
    Not,
    Neg,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum BinaryOp {
    Or,
    And,
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
    Add,
    Sub,
    Mul,
    Div,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum QuantifierKind {
    Every,
    Some,
    Count,
}
