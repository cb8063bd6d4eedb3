//! A deterministic generator of large, valid specs for the benchmark and the fuzz corpus.
//!
//! The generated spec is a long chain of stages: each stage has its own contract and a
//! role that turns the previous stage's contract into its own, with an inline prompt that
//! only reads variables the role is given (its input, `feedback`, `rules`, `tools`,
//! `output_schema`). Some stages fan out over a bounded list with an `each` step, some
//! branch with `when`, some hold a tool; the tail is a reviewer, a gate with hard, warn and
//! score rules, an exhaustive repair table and a finalizer, as in DESIGN §2.1. Every
//! contract, tool, rules block and model alias is used, so the spec compiles clean.

use std::fmt::Write as _;

use crate::rng::Rng;

/// Writes one line (`writeln!` into a `String` cannot fail).
macro_rules! emit {
    ($out:expr) => {
        $out.push('\n')
    };
    ($out:expr, $($arg:tt)*) => {{
        let _ = writeln!($out, $($arg)*);
    }};
}

/// What to generate.
#[derive(Clone, Copy, Debug)]
pub struct GenConfig {
    /// Roughly how many lines the spec should have (at least a few dozen are always
    /// written: the header, the tail and two stages).
    pub lines: usize,
    /// Drives the choice of field types, prompts, models and transitions.
    pub seed: u64,
}

impl Default for GenConfig {
    fn default() -> GenConfig {
        GenConfig {
            lines: 10_000,
            seed: 0x00C0_FFEE,
        }
    }
}

/// A generated spec and what it holds.
#[derive(Clone, Debug)]
pub struct Generated {
    pub text: String,
    pub lines: usize,
    pub contracts: usize,
    pub roles: usize,
    pub tools: usize,
    pub steps: usize,
}

const CONSONANTS: [char; 14] = [
    'b', 'd', 'f', 'g', 'k', 'l', 'm', 'n', 'p', 'r', 's', 't', 'v', 'z',
];
const VOWELS: [char; 5] = ['a', 'e', 'i', 'o', 'u'];
const MODELS: [&str; 3] = ["default", "strong", "fast"];
const RULES: [(&str, [&str; 4]); 4] = [
    (
        "core",
        [
            "Never fabricate a tool result.",
            "Never lower a threshold or delete evidence to make a gate pass.",
            "State what you did not do and why.",
            "Keep every identifier you were given unchanged.",
        ],
    ),
    (
        "safety",
        [
            "Never write a secret, key or token into an output.",
            "Refuse work that needs a tool you were not given.",
            "Prefer a partial, honest result over a complete, invented one.",
            "Report every external side effect you caused.",
        ],
    ),
    (
        "style",
        [
            "Write short, plain sentences.",
            "Use the vocabulary of the input, not synonyms.",
            "Put the most important finding first.",
            "Quote numbers with their units.",
        ],
    ),
    (
        "evidence",
        [
            "Cite the source of every claim.",
            "Mark guesses as guesses.",
            "Keep the evidence you used; never summarise it away.",
            "Say which acceptance criterion each part satisfies.",
        ],
    ),
];

/// Optional fields a stage contract may carry beyond `title`, `score` and `level`.
const EXTRA_FIELDS: [&str; 8] = [
    "summary: string",
    "confidence: float(0.0..=1.0)",
    "tags: list<string>(0..=8) = []",
    "note: string?",
    "done: bool = false",
    "attempts: int(0..=5) = 0",
    "sources: list<string>(..=20) = []",
    "owner: string = \"unassigned\"",
];

/// The stages of the chain and how each one moves on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Transition {
    /// `-> next`
    Goto,
    /// `-> each step over this stage's parts -> next`
    FanOut,
    /// `when s.score < 10 -> failed "..." else -> next`
    WhenScore,
    /// `when s.level == high -> next else -> next`
    WhenLevel,
}

/// Generates a spec of about `config.lines` lines: the stages first (their length sets how
/// many there are), then the spec in order around them.
pub fn generate(config: GenConfig) -> Generated {
    let mut rng = Rng::new(config.seed);
    let mut chain = write_chain(&mut rng, config.lines);
    // The last stage feeds the final fan-out, so it needs parts even if it did not fan out.
    let last = chain.stages.len() - 1;

    let mut out = String::new();
    write_header(&mut out, config.seed, chain.stages.len());
    write_fixed_contracts(&mut out);
    chain.counts.contracts += 3;
    out.push_str(&chain.contracts);
    if chain.stages.get(last) != Some(&Transition::FanOut) {
        out = with_last_stage_parts(out, last);
        chain.counts.contracts += 1;
    }
    emit!(out);
    out.push_str(&chain.tools);
    emit!(out);
    out.push_str(&chain.roles);
    write_tail_roles(&mut out, last);
    chain.counts.roles += 3;
    emit!(out);
    write_gate(&mut out);
    emit!(out);
    write_repair(&mut out, chain.stages.len());
    emit!(out);
    write_invariants_and_budget(&mut out, &chain.tool_owners);
    emit!(out);
    write_flow(&mut out, &chain.stages);

    Generated {
        lines: line_count(&out),
        text: out,
        contracts: chain.counts.contracts,
        roles: chain.counts.roles,
        tools: chain.counts.tools,
        steps: step_count(&chain.stages),
    }
}

/// The stages written so far: their contracts, tools and roles (each section of the spec
/// grows stage by stage), how each moves on, and which role owns each tool.
#[derive(Debug, Default)]
struct Chain {
    contracts: String,
    tools: String,
    roles: String,
    stages: Vec<Transition>,
    tool_owners: Vec<(String, String)>,
    counts: Counts,
}

impl Chain {
    fn lines(&self) -> usize {
        line_count(&self.contracts) + line_count(&self.tools) + line_count(&self.roles)
    }
}

#[derive(Debug, Default)]
struct Counts {
    contracts: usize,
    roles: usize,
    tools: usize,
}

/// Stages until the spec would reach `lines` (at least two), each written with what it
/// adds to the flow counted.
fn write_chain(rng: &mut Rng, lines: usize) -> Chain {
    let mut chain = Chain::default();
    // Lines the fixed parts take: header, models, rules, the tail contracts and roles,
    // gate, repair, invariants, budget, and the flow's frame and tail steps.
    let fixed_lines = 120;
    let mut stage_lines = 0;
    let mut index = 0;
    while index < 2 || fixed_lines + stage_lines < lines {
        let transition = transition_of(index);
        let before = chain.lines();
        write_stage(rng, index, transition, &mut chain);
        chain.stages.push(transition);
        let flow_lines = if transition == Transition::FanOut {
            2
        } else {
            1
        };
        stage_lines += chain.lines() - before + flow_lines;
        index += 1;
    }
    chain
}

/// How stage `index` moves on: the first goes straight on, every twentieth (from the
/// tenth) fans out, and of each seven, the sixth and seventh branch.
fn transition_of(index: usize) -> Transition {
    if index == 0 {
        Transition::Goto
    } else if index % 20 == 10 {
        Transition::FanOut
    } else if index % 7 == 5 {
        Transition::WhenScore
    } else if index % 7 == 6 {
        Transition::WhenLevel
    } else {
        Transition::Goto
    }
}

/// The spec's head: a comment with the seed, the `spec` line and its doc, the models and
/// the rules blocks.
fn write_header(out: &mut String, seed: u64, stages: usize) {
    emit!(
        out,
        "// Generated by `cargo xtask bench` (xtask/src/gen.rs); seed {:#x}.",
        seed
    );
    emit!(out, "spec generated_bench version \"1.0.0\"");
    emit!(
        out,
        "\"\"\"A long chain of {} stages, for measuring the compiler.\"\"\"",
        stages
    );
    emit!(out);
    emit!(out, "models {{");
    emit!(out, "  default = \"openai:gpt-4o-mini\" price 0.15 / 0.60");
    emit!(
        out,
        "  strong  = \"anthropic:claude-sonnet-4-5\" price 3 / 15"
    );
    emit!(out, "  fast    = \"openai:gpt-4.1-nano\"");
    emit!(out, "}}");
    emit!(out);
    for (name, lines) in RULES {
        emit!(out, "rules {name} version \"2026.11\" {{");
        for line in lines {
            emit!(out, "  \"{line}\"");
        }
        emit!(out, "}}");
    }
    emit!(out);
}

/// The three contracts of the flow's frame: its input, a finished part, a review.
fn write_fixed_contracts(out: &mut String) {
    emit!(
        out,
        "contract Request {{ goal: string  constraints: list<string>(0..=10) = [] }}"
    );
    emit!(out, "contract Outcome {{");
    emit!(out, "  part: string");
    emit!(out, "  status: ok | failed | partial");
    emit!(out, "  output: string");
    emit!(out, "}}");
    emit!(out, "contract Review {{");
    emit!(out, "  relevance: int(0..=10)");
    emit!(out, "  completeness: int(0..=10)");
    emit!(out, "  verdict: PASS | FAIL | OPTIMIZE");
    emit!(out, "  notes: string?");
    emit!(out, "}}");
}

/// `out` with a `parts` field added to the last stage's contract (written without one, as
/// it did not fan out), and that field's contract: the final fan-out reads the parts.
fn with_last_stage_parts(out: String, last: usize) -> String {
    let camel = camel(last);
    let header = format!("contract Stage{camel} {{\n");
    let mut out = out.replacen(
        &header,
        &format!("{header}  parts: list<Part{camel}>(1..=5)\n"),
        1,
    );
    emit!(
        out,
        "contract Part{camel} {{ label: string  weight: float(0.0..=1.0) }}"
    );
    out
}

/// The roles of the flow's tail: the finisher of each part of the last stage, the
/// reviewer and the finalizer.
fn write_tail_roles(out: &mut String, last: usize) {
    emit!(out, "role finisher {{");
    emit!(out, "  model: fast");
    emit!(out, "  prompt: \"\"\"");
    emit!(
        out,
        "    Finish the part \"{{{{ part_{}.label }}}}\".",
        snake(last)
    );
    emit!(
        out,
        "    {{% if feedback %}}Fix first: {{{{ feedback }}}}{{% endif %}}"
    );
    emit!(out, "    Reply with JSON matching {{{{ output_schema }}}}");
    emit!(out, "  \"\"\"");
    emit!(out, "  rules: [safety]");
    emit!(out, "  input: Part{}", camel(last));
    emit!(out, "  output: Outcome");
    emit!(out, "  timeout: 5m");
    emit!(out, "  retry: 2 backoff 1s");
    emit!(out, "}}");
    emit!(out, "role reviewer {{");
    emit!(out, "  model: strong");
    emit!(out, "  prompt: \"\"\"");
    emit!(out, "    Review candidate {{{{ candidate.id }}}}:");
    emit!(out, "    {{{{ candidate.text }}}}");
    emit!(out, "    Reply with JSON matching {{{{ output_schema }}}}");
    emit!(out, "  \"\"\"");
    emit!(out, "  rules: [evidence]");
    emit!(out, "  input: Candidate");
    emit!(out, "  output: Review");
    emit!(out, "  timeout: 2m");
    emit!(out, "  retry: 1 backoff 1s");
    emit!(out, "}}");
    emit!(out, "role finalizer {{");
    emit!(out, "  model: default");
    emit!(out, "  prompt: \"\"\"");
    emit!(
        out,
        "    Summarise candidate {{{{ candidate.id }}}} for delivery."
    );
    emit!(out, "    Reply with JSON matching {{{{ output_schema }}}}");
    emit!(out, "  \"\"\"");
    // Every rules block and model alias is used however few stages there are.
    emit!(out, "  rules: [style]");
    emit!(out, "  input: Candidate");
    emit!(out, "  output: Delivery");
    emit!(out, "  timeout: 2m");
    emit!(out, "}}");
}

/// The gate on the executed parts: hard, warn and score rules.
fn write_gate(out: &mut String) {
    emit!(out, "gate quality on execute {{");
    emit!(
        out,
        "  hard all_done:  every r in candidate.items: r.status != failed   else STAGE_FAILED"
    );
    emit!(
        out,
        "  hard no_secret: not matches(candidate.text, \"sk-[A-Za-z0-9]{{20,}}\") else SECRET_LEAK"
    );
    emit!(out, "  warn has_notes: review.notes != none else NO_NOTES");
    emit!(
        out,
        "  score relevance    weight 2: review.relevance     below 6 LOW_RELEVANCE"
    );
    emit!(
        out,
        "  score completeness weight 1: review.completeness  below 6 INCOMPLETE"
    );
    emit!(out, "  pass when score >= 7.0");
    emit!(out, "}}");
}

/// The repair table, exhaustive over the gate's codes; a low score reruns the middle stage.
fn write_repair(out: &mut String, stages: usize) {
    let middle = stage_name(stages / 2);
    emit!(out, "repair {{");
    emit!(out, "  rounds 3");
    emit!(out, "  no_progress 2");
    emit!(out, "  STAGE_FAILED -> rerun execute");
    emit!(
        out,
        "  LOW_RELEVANCE, INCOMPLETE -> rerun {middle} with feedback"
    );
    emit!(out, "  SECRET_LEAK -> block \"secret in candidate\"");
    emit!(out, "  NO_NOTES -> accept");
    emit!(out, "}}");
}

/// The invariants (the reviewer has no tools, the first eight tools have one owner, a
/// token bound) and a budget no run reaches.
fn write_invariants_and_budget(out: &mut String, tool_owners: &[(String, String)]) {
    emit!(out, "invariant judges_are_toolless: reviewer has no tools");
    for (position, (tool, role)) in tool_owners.iter().enumerate().take(8) {
        emit!(
            out,
            "invariant tool_owner_{position}: only {role} uses {tool}"
        );
    }
    emit!(
        out,
        "invariant bounded_tokens: always run.tokens <= 1000000000"
    );
    emit!(out);
    emit!(
        out,
        "budget {{ tokens 1000000000  cost 100000  wall 100000h  steps 1000000 }}"
    );
}

/// The flow: one step per stage (two for a fan-out), a confirmation after the first, then
/// the tail: execute the last stage's parts, review, judge, deliver.
fn write_flow(out: &mut String, stages: &[Transition]) {
    let last = stages.len() - 1;
    emit!(out, "flow {{");
    for (position, transition) in stages.iter().enumerate() {
        write_flow_step(out, position, *transition, last);
    }
    emit!(
        out,
        "  execute = each t in {}.parts: finisher(t) concurrency 4 -> review",
        stage_name(last)
    );
    emit!(out, "  review  = reviewer(candidate) -> judge");
    emit!(
        out,
        "  judge   = gate quality pass -> deliver fail -> repair"
    );
    emit!(out, "  deliver = finalize finalizer(best) -> done");
    emit!(out, "}}");
}

/// The flow step of stage `position`, moving on by `transition`.
fn write_flow_step(out: &mut String, position: usize, transition: Transition, last: usize) {
    let step = stage_name(position);
    let role = role_name(position);
    let input = if position == 0 {
        "request".to_string()
    } else {
        stage_name(position - 1)
    };
    let next = if position == last {
        "execute".to_string()
    } else if position == 0 {
        "confirm".to_string()
    } else {
        stage_name(position + 1)
    };
    match transition {
        Transition::Goto => emit!(out, "  {step} = {role}({input}) -> {next}"),
        Transition::FanOut => {
            let fan = format!("fan_{}", snake(position));
            emit!(out, "  {step} = {role}({input}) -> {fan}");
            emit!(
                out,
                "  {fan} = each p in {step}.parts: worker_{}(p) concurrency 4 -> {next}",
                snake(position)
            );
        }
        Transition::WhenScore => emit!(
            out,
            "  {step} = {role}({input}) when {step}.score < 10 -> failed \"stage {position} scored too low\" else -> {next}"
        ),
        Transition::WhenLevel => emit!(
            out,
            "  {step} = {role}({input}) when {step}.level == high -> {next} else -> {next}"
        ),
    }
    if position == 0 {
        emit!(
            out,
            "  confirm = ask \"Go ahead with this goal?\" when confirm.approved -> {} else -> blocked \"rejected by a person\"",
            stage_name(1)
        );
    }
}

/// The flow's steps: one per stage, one more per fan-out, and the five of the frame
/// (confirm, execute, review, judge, deliver).
fn step_count(stages: &[Transition]) -> usize {
    stages.len()
        + stages
            .iter()
            .filter(|transition| **transition == Transition::FanOut)
            .count()
        + 5
}

/// Stage `index`: its contract, its tool (every sixth stage), its role, and for a fan-out
/// the part and work contracts and the worker role. The random draws happen in this order,
/// which fixes the spec a seed gives.
fn write_stage(rng: &mut Rng, index: usize, transition: Transition, chain: &mut Chain) {
    write_stage_contract(rng, index, transition, chain);
    let tool = write_stage_tool(rng, index, chain);
    write_stage_role(rng, index, tool.as_deref(), chain);
    if transition == Transition::FanOut {
        write_fan_out(index, chain);
    }
}

/// The stage's contract: three fixed fields the flow reads, some varied extras, and
/// `parts` for a fan-out.
fn write_stage_contract(rng: &mut Rng, index: usize, transition: Transition, chain: &mut Chain) {
    let camel = camel(index);
    let contracts = &mut chain.contracts;
    emit!(contracts, "// stage {index}");
    emit!(contracts, "contract Stage{camel} {{");
    emit!(contracts, "  title: string");
    emit!(contracts, "  score: int(0..=100)");
    emit!(contracts, "  level: low | medium | high");
    let extras = rng.between(1, 4);
    let start = rng.below(EXTRA_FIELDS.len());
    for offset in 0..extras {
        if let Some(field) = EXTRA_FIELDS.get((start + offset) % EXTRA_FIELDS.len()) {
            emit!(contracts, "  {field}");
        }
    }
    if transition == Transition::FanOut {
        emit!(contracts, "  parts: list<Part{camel}>(1..=5)");
    }
    emit!(contracts, "}}");
    chain.counts.contracts += 1;
}

/// A tool on every sixth stage, owned by that stage's role alone, with its query and hits
/// contracts. Returns its name.
fn write_stage_tool(rng: &mut Rng, index: usize, chain: &mut Chain) -> Option<String> {
    let camel = camel(index);
    let tool = (index % 6 == 2).then(|| format!("t_{}", snake(index)))?;
    let effect = ["read", "read", "write", "external"]
        .get(rng.below(4))
        .copied()
        .unwrap_or("read");
    emit!(
        chain.contracts,
        "contract Query{camel} {{ text: string  limit: int(1..=50) = 10 }}"
    );
    emit!(
        chain.contracts,
        "contract Hits{camel} {{ urls: list<string>(0..=50) }}"
    );
    emit!(
        chain.tools,
        "tool {tool} {{ input: Query{camel}  output: Hits{camel}  effect: {effect} }}"
    );
    chain.counts.contracts += 2;
    chain.counts.tools += 1;
    chain.tool_owners.push((tool.clone(), role_name(index)));
    Some(tool)
}

/// The stage's role: a model and a rules block in turn, one of three prompts over the
/// previous stage's output (the request's goal for the first), its tool, and random
/// timeout and retry settings.
fn write_stage_role(rng: &mut Rng, index: usize, tool: Option<&str>, chain: &mut Chain) {
    let model = MODELS
        .get(index % MODELS.len())
        .copied()
        .unwrap_or("default");
    let rules = RULES
        .get(index % RULES.len())
        .map_or("core", |(name, _)| *name);
    let (input_contract, input_var, input_text) = if index == 0 {
        ("Request".to_string(), "request".to_string(), "goal")
    } else {
        (
            format!("Stage{}", camel(index - 1)),
            format!("stage_{}", snake(index - 1)),
            "title",
        )
    };
    let roles = &mut chain.roles;
    emit!(roles, "role {} {{", role_name(index));
    emit!(roles, "  model: {model}");
    emit!(roles, "  prompt: \"\"\"");
    write_stage_prompt(rng, index, &format!("{input_var}.{input_text}"), roles);
    if tool.is_some() {
        emit!(
            roles,
            "    Tools: {{% for tool in tools %}}{{{{ tool }}}} {{% endfor %}}"
        );
    }
    emit!(
        roles,
        "    Reply with JSON matching {{{{ output_schema }}}}"
    );
    emit!(roles, "  \"\"\"");
    emit!(roles, "  rules: [{rules}]");
    emit!(roles, "  input: {input_contract}");
    emit!(roles, "  output: Stage{}", camel(index));
    if let Some(tool) = tool {
        emit!(roles, "  tools: [{tool}]");
        emit!(roles, "  max_tool_calls: {}", rng.between(1, 8));
    }
    emit!(roles, "  timeout: {}m", rng.between(1, 15));
    emit!(
        roles,
        "  retry: {} backoff {}s",
        rng.between(0, 3),
        rng.between(1, 4)
    );
    emit!(roles, "}}");
    chain.counts.roles += 1;
}

/// The body of a stage's prompt: one of three wordings around `input` (the variable it
/// improves) and `feedback`, then the rules.
fn write_stage_prompt(rng: &mut Rng, index: usize, input: &str, roles: &mut String) {
    match rng.below(3) {
        0 => {
            emit!(
                roles,
                "    You are stage {index}. Improve \"{{{{ {input} }}}}\"."
            );
            emit!(
                roles,
                "    {{% if feedback %}}Address this feedback first: {{{{ feedback }}}}{{% endif %}}"
            );
        }
        1 => {
            emit!(
                roles,
                "    Stage {index}: take the work below one step further."
            );
            emit!(roles, "    Work: {{{{ {input} }}}}");
            emit!(
                roles,
                "    {{% if feedback %}}Earlier issues: {{{{ feedback }}}}{{% endif %}}"
            );
        }
        _ => {
            emit!(roles, "    {{% if feedback %}}");
            emit!(roles, "    Fix these issues: {{{{ feedback }}}}");
            emit!(roles, "    {{% else %}}");
            emit!(roles, "    Refine \"{{{{ {input} }}}}\" (stage {index}).");
            emit!(roles, "    {{% endif %}}");
        }
    }
    emit!(roles, "    Rules:");
    emit!(roles, "    {{% for rule in rules %}}- {{{{ rule }}}}");
    emit!(roles, "    {{% endfor %}}");
}

/// A fan-out stage's part and work contracts and the worker role each part goes to.
fn write_fan_out(index: usize, chain: &mut Chain) {
    let camel = camel(index);
    let snake = snake(index);
    emit!(
        chain.contracts,
        "contract Part{camel} {{ label: string  weight: float(0.0..=1.0) }}"
    );
    emit!(
        chain.contracts,
        "contract Work{camel} {{ label: string  ok: bool  detail: string? }}"
    );
    chain.counts.contracts += 2;
    let roles = &mut chain.roles;
    emit!(roles, "role worker_{snake} {{");
    emit!(roles, "  model: fast");
    emit!(
        roles,
        "  prompt: \"\"\"Do the part \"{{{{ part_{snake}.label }}}}\" and report.\"\"\""
    );
    emit!(roles, "  input: Part{camel}");
    emit!(roles, "  output: Work{camel}");
    emit!(roles, "  timeout: 1m");
    emit!(roles, "}}");
    chain.counts.roles += 1;
}

fn stage_name(index: usize) -> String {
    format!("s_{}", snake(index))
}

fn role_name(index: usize) -> String {
    format!("r_{}", snake(index))
}

/// The syllables naming stage `index`: its base-70 digits, at least two, so names contain
/// no digits (contract names then map to template variables unambiguously).
fn syllables(index: usize) -> Vec<String> {
    let base = CONSONANTS.len() * VOWELS.len();
    let mut parts = Vec::new();
    let mut rest = index;
    loop {
        let digit = rest % base;
        let consonant = CONSONANTS.get(digit / VOWELS.len()).copied().unwrap_or('b');
        let vowel = VOWELS.get(digit % VOWELS.len()).copied().unwrap_or('a');
        parts.push(format!("{consonant}{vowel}"));
        rest /= base;
        if rest == 0 && parts.len() >= 2 {
            break;
        }
    }
    parts
}

/// `ba_ke`: the lower-case name of stage `index`.
fn snake(index: usize) -> String {
    syllables(index).join("_")
}

/// `BaKe`: the contract-name form of stage `index`.
fn camel(index: usize) -> String {
    syllables(index)
        .iter()
        .map(|part| {
            let mut chars = part.chars();
            chars.next().map_or_else(String::new, |first| {
                first.to_ascii_uppercase().to_string() + chars.as_str()
            })
        })
        .collect()
}

fn line_count(text: &str) -> usize {
    text.lines().count()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_unique_and_digit_free() {
        let names: std::collections::BTreeSet<String> = (0..5000).map(snake).collect();
        assert_eq!(names.len(), 5000);
        assert!(
            names
                .iter()
                .all(|name| !name.contains(|c: char| c.is_ascii_digit()))
        );
        assert_eq!(camel(0), "BaBa");
        assert_eq!(snake(71), "be_be");
    }

    #[test]
    fn generation_is_deterministic_and_near_the_requested_size() {
        let config = GenConfig::default();
        let first = generate(config);
        let second = generate(config);
        assert_eq!(first.text, second.text);
        assert!(
            (9_500..=10_500).contains(&first.lines),
            "{} lines",
            first.lines
        );
        assert!(first.contracts >= 300 && first.roles >= 300 && first.steps >= 300);
        let small = generate(GenConfig { lines: 10, seed: 1 });
        assert!(small.lines < 200);
    }

    /// The generated spec must compile with no error and no warning: the benchmark times
    /// a clean compilation and the fuzz harness mutates a valid spec.
    #[test]
    fn generated_spec_compiles_clean() {
        for (lines, seed) in [
            (10, 4),
            (100, 3),
            (300, 1),
            (2_000, 2),
            (10_000, GenConfig::default().seed),
        ] {
            let generated = generate(GenConfig { lines, seed });
            let compilation = charter_compiler::compile(
                "generated.charter",
                &generated.text,
                &charter_compiler::NoFiles,
            );
            let rendered = charter_compiler::render::text(
                &compilation.diagnostics,
                &compilation.sources,
                false,
            );
            assert!(
                compilation.diagnostics.is_empty(),
                "generated spec ({lines} lines, seed {seed}) is not clean:\n{rendered}"
            );
        }
    }
}
