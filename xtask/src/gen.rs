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

/// Generates a spec of about `config.lines` lines.
pub fn generate(config: GenConfig) -> Generated {
    let mut rng = Rng::new(config.seed);
    let mut contracts = String::new();
    let mut tools = String::new();
    let mut roles = String::new();
    let mut stages: Vec<Transition> = Vec::new();
    let mut tool_owners: Vec<(String, String)> = Vec::new();
    let mut counts = Counts::default();

    // Lines the fixed parts take: header, models, rules, the tail contracts and roles,
    // gate, repair, invariants, budget, and the flow's frame and tail steps.
    let fixed_lines = 120;
    let mut stage_lines = 0;
    let mut index = 0;
    while index < 2 || fixed_lines + stage_lines < config.lines {
        let transition = if index == 0 {
            Transition::Goto
        } else if index % 20 == 10 {
            Transition::FanOut
        } else if index % 7 == 5 {
            Transition::WhenScore
        } else if index % 7 == 6 {
            Transition::WhenLevel
        } else {
            Transition::Goto
        };
        let before = line_count(&contracts) + line_count(&tools) + line_count(&roles);
        write_stage(
            &mut rng,
            index,
            transition,
            &mut contracts,
            &mut tools,
            &mut roles,
            &mut tool_owners,
            &mut counts,
        );
        stages.push(transition);
        let flow_lines = if transition == Transition::FanOut {
            2
        } else {
            1
        };
        stage_lines +=
            line_count(&contracts) + line_count(&tools) + line_count(&roles) - before + flow_lines;
        index += 1;
    }
    // The last stage feeds the final fan-out, so it needs parts even if it did not fan out.
    let last = stages.len() - 1;

    let mut out = String::new();
    emit!(
        out,
        "// Generated by `cargo xtask bench` (xtask/src/gen.rs); seed {:#x}.",
        config.seed
    );
    emit!(out, "spec generated_bench version \"1.0.0\"");
    emit!(
        out,
        "\"\"\"A long chain of {} stages, for measuring the compiler.\"\"\"",
        stages.len()
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
    counts.contracts += 3;
    out.push_str(&contracts);
    // The final fan-out reads the last stage's parts.
    if stages.get(last) != Some(&Transition::FanOut) {
        let camel = camel(last);
        let header = format!("contract Stage{camel} {{\n");
        out = out.replacen(
            &header,
            &format!("{header}  parts: list<Part{camel}>(1..=5)\n"),
            1,
        );
        emit!(
            out,
            "contract Part{camel} {{ label: string  weight: float(0.0..=1.0) }}"
        );
        counts.contracts += 1;
    }
    emit!(out);
    out.push_str(&tools);
    emit!(out);
    out.push_str(&roles);
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
    counts.roles += 3;
    emit!(out);
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
    emit!(out);
    let middle = stage_name(stages.len() / 2);
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
    emit!(out);
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
    emit!(out);
    emit!(out, "flow {{");
    for (position, transition) in stages.iter().enumerate() {
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

    let steps = stages.len()
        + stages
            .iter()
            .filter(|transition| **transition == Transition::FanOut)
            .count()
        + 5;
    Generated {
        lines: line_count(&out),
        text: out,
        contracts: counts.contracts,
        roles: counts.roles,
        tools: counts.tools,
        steps,
    }
}

#[derive(Debug, Default)]
struct Counts {
    contracts: usize,
    roles: usize,
    tools: usize,
}

#[allow(clippy::too_many_arguments)]
fn write_stage(
    rng: &mut Rng,
    index: usize,
    transition: Transition,
    contracts: &mut String,
    tools: &mut String,
    roles: &mut String,
    tool_owners: &mut Vec<(String, String)>,
    counts: &mut Counts,
) {
    let camel = camel(index);
    let snake = snake(index);

    // The stage's contract: three fixed fields the flow reads, some varied extras.
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
    counts.contracts += 1;

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
            format!("Stage{}", self::camel(index - 1)),
            format!("stage_{}", self::snake(index - 1)),
            "title",
        )
    };

    // A tool on every sixth stage, owned by that stage's role alone.
    let tool = (index % 6 == 2).then(|| format!("t_{snake}"));
    if let Some(tool) = &tool {
        let effect = ["read", "read", "write", "external"]
            .get(rng.below(4))
            .copied()
            .unwrap_or("read");
        emit!(
            contracts,
            "contract Query{camel} {{ text: string  limit: int(1..=50) = 10 }}"
        );
        emit!(
            contracts,
            "contract Hits{camel} {{ urls: list<string>(0..=50) }}"
        );
        emit!(
            tools,
            "tool {tool} {{ input: Query{camel}  output: Hits{camel}  effect: {effect} }}"
        );
        counts.contracts += 2;
        counts.tools += 1;
        tool_owners.push((tool.clone(), role_name(index)));
    }

    emit!(roles, "role {} {{", role_name(index));
    emit!(roles, "  model: {model}");
    emit!(roles, "  prompt: \"\"\"");
    match rng.below(3) {
        0 => {
            emit!(
                roles,
                "    You are stage {index}. Improve \"{{{{ {input_var}.{input_text} }}}}\"."
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
            emit!(roles, "    Work: {{{{ {input_var}.{input_text} }}}}");
            emit!(
                roles,
                "    {{% if feedback %}}Earlier issues: {{{{ feedback }}}}{{% endif %}}"
            );
        }
        _ => {
            emit!(roles, "    {{% if feedback %}}");
            emit!(roles, "    Fix these issues: {{{{ feedback }}}}");
            emit!(roles, "    {{% else %}}");
            emit!(
                roles,
                "    Refine \"{{{{ {input_var}.{input_text} }}}}\" (stage {index})."
            );
            emit!(roles, "    {{% endif %}}");
        }
    }
    emit!(roles, "    Rules:");
    emit!(roles, "    {{% for rule in rules %}}- {{{{ rule }}}}");
    emit!(roles, "    {{% endfor %}}");
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
    emit!(roles, "  output: Stage{camel}");
    if let Some(tool) = &tool {
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
    counts.roles += 1;

    if transition == Transition::FanOut {
        emit!(
            contracts,
            "contract Part{camel} {{ label: string  weight: float(0.0..=1.0) }}"
        );
        emit!(
            contracts,
            "contract Work{camel} {{ label: string  ok: bool  detail: string? }}"
        );
        counts.contracts += 2;
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
        counts.roles += 1;
    }
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
