//! `charter explain CODE`: a paragraph on each diagnostic code with a wrong and a right example.
//!
//! The examples show only the items that matter for the code; the rest of a spec (the
//! `spec` header, other roles and contracts) is left out.

use crate::diagnostics::Code;

/// The explanation of `code`: a title line, a paragraph, a wrong example and a right one
/// (E000, an internal error, has what to do instead of examples).
pub fn explain(code: Code) -> &'static str {
    match code {
        Code::E000 => E000,
        Code::E001 => E001,
        Code::E002 => E002,
        Code::E003 => E003,
        Code::E004 => E004,
        Code::E005 => E005,
        Code::E006 => E006,
        Code::E007 => E007,
        Code::E008 => E008,
        Code::E009 => E009,
        Code::E010 => E010,
        Code::E011 => E011,
        Code::E012 => E012,
        Code::E013 => E013,
        Code::E014 => E014,
        Code::E015 => E015,
        Code::E016 => E016,
        Code::E017 => E017,
        Code::E018 => E018,
        Code::E019 => E019,
        Code::E020 => E020,
        Code::E021 => E021,
        Code::E022 => E022,
        Code::E023 => E023,
        Code::E024 => E024,
        Code::E025 => E025,
        Code::E026 => E026,
        Code::W001 => W001,
        Code::W002 => W002,
        Code::W003 => W003,
        Code::W004 => W004,
        Code::W005 => W005,
        Code::W006 => W006,
        Code::W007 => W007,
        Code::W008 => W008,
        Code::W009 => W009,
        Code::W010 => W010,
        Code::W011 => W011,
        Code::W012 => W012,
        Code::W013 => W013,
        Code::W014 => W014,
        Code::W015 => W015,
        Code::W016 => W016,
    }
}

const E000: &str = r#"E000: internal compiler error

The checks accepted the spec, but building the compiled graph met something a check
should have rejected. This is a bug in charter, not in your spec: a check is missing.
The message names what the graph builder could not handle.

What to do:

    Report the spec (or the smallest part of it that still shows E000) with the full
    output of `charter check`. Until it is fixed, rewriting the construct the message
    names usually avoids it.
"#;

const E001: &str = r#"E001: syntax error

The text does not follow the grammar of DESIGN §2.2. The message says what the parser
expected at the caret. Common causes: a missing keyword (`version`, `on`, `else`), a
missing closing brace or `"""`, a contract name that does not start with an upper-case
letter, or a step without its `->` transition.

Wrong:

    spec closed_loop "1.0.0"

Right:

    spec closed_loop version "1.0.0"
"#;

const E002: &str = r#"E002: unknown name

A contract, role, tool, gate, step, model alias or rules block is used but never
defined. Each kind of name has its own namespace, so a role and a step may share a name,
but a role cannot be used where a contract is expected. When a defined name is close, the
help line suggests it.

Wrong:

    contract Plan { goal: string  tasks: list<Task>(1..=20) }
    role planner {
      model: default
      prompt: """Plan the work for {{ request.goal }}."""
      input: Request
      output: Pln
    }

Right:

    contract Plan { goal: string  tasks: list<Task>(1..=20) }
    role planner {
      model: default
      prompt: """Plan the work for {{ request.goal }}."""
      input: Request
      output: Plan
    }
"#;

const E003: &str = r#"E003: duplicate definition

The same name is defined twice in one namespace (two contracts, two roles, two steps,
two model aliases...), or a spec has a second `repair`, `budget` or `flow` block, or a
contract redefines a built-in one (`Candidate`, `Delivery`, `Answer`). The first
definition is kept and the second is reported; rename or merge them.

Wrong:

    contract Review { relevance: int(0..=10) }
    contract Review { verdict: PASS | FAIL }

Right:

    contract Review { relevance: int(0..=10)  verdict: PASS | FAIL }
"#;

const E004: &str = r#"E004: type error

An expression or argument does not fit the types of the contracts it reads: a path into
a contract that has no such field, a comparison between a string and an int, an enum
variant that is not in the enum, an optional field used without a `none` check, or a
built-in function given the wrong kind of value.

Wrong:

    contract Review { relevance: int(0..=10)  verdict: PASS | FAIL }
    gate quality on execute {
      hard approved: review.verdict == APPROVED else REJECTED
      pass when review.relevance >= 7
    }

Right:

    contract Review { relevance: int(0..=10)  verdict: PASS | FAIL }
    gate quality on execute {
      hard approved: review.verdict == PASS else REJECTED
      pass when review.relevance >= 7
    }
"#;

const E005: &str = r#"E005: role input or output does not match the flow

A step calls a role with a value whose contract is not the role's input, or feeds a
step's output to a role that expects something else. An `each` step passes one item of
a list at a time, so a role that handles one `Task` must be called through `each`, not
with the whole `Plan`. A `tool` step (`check = tool validate_workflow(ARG)`) passes
exactly one argument, which must be the tool's `input` contract; a record literal builds
one from an earlier step's fields:
`check = tool validate_workflow({workflow_id: create.workflow_id, version: create.version})`.

Wrong:

    role executor { model: default  prompt: """Do {{ task.goal }}."""  input: Task  output: StageResult }
    flow {
      plan    = planner(request)  -> execute
      execute = executor(plan)    -> done
    }

Right:

    role executor { model: default  prompt: """Do {{ task.goal }}."""  input: Task  output: StageResult }
    flow {
      plan    = planner(request)                                -> execute
      execute = each t in plan.tasks: executor(t) concurrency 4  -> done
    }
"#;

const E006: &str = r#"E006: unbounded loop

The flow has a cycle that passes through no `repair` edge and is not bounded by
`budget.steps`, so a run could go round it forever, paying for every model call. Send
the loop through a gate whose `fail -> repair` edge is counted by `repair.rounds`,
through an `ask "…" max N` (a person answers at most N times), or give the spec a
`budget { steps N }` that stops it.

Wrong:

    flow {
      draft  = writer(request)  -> review
      review = reviewer(draft)  when review.verdict == PASS -> done  else -> draft
    }

Right:

    gate approved on draft {
      hard passed: review.verdict == PASS else REJECTED
      pass when review.verdict == PASS
    }
    repair { rounds 3  REJECTED -> rerun draft with feedback }
    flow {
      draft  = writer(request)  -> review
      review = reviewer(draft)  -> judge
      judge  = gate approved    pass -> done  fail -> repair
    }
"#;

const E007: &str = r#"E007: unreachable step, or no way to finish

A step cannot be reached from the first step of the flow, or a step can be reached but
no terminal (`done`, `blocked "..."`, `failed "..."`) can be reached from it. An
unreachable step is dead code; a step that cannot finish would make every run that
enters it end only by exhausting a budget.

Wrong:

    flow {
      plan    = planner(request)    -> done
      summary = summarizer(plan)    -> done
    }

Right:

    flow {
      plan    = planner(request)    -> summary
      summary = summarizer(plan)    -> done
    }
"#;

const E008: &str = r#"E008: repair not exhaustive

A gate evaluated by a `gate` step can emit an issue code (from a `hard` or `warn` rule's
`else`, or a score's `below`) that the `repair` block gives no action, and there is no
`_` arm. When that issue is raised the runtime would not know what may be done. Give the
code an action, or add `_ -> ...` for everything not listed. (Gates used by a per-item
`check` are handled by stage retries and need no repair arm.)

Wrong:

    gate quality on execute {
      hard all_done: every r in candidate.items: r.status != failed else STAGE_FAILED
      score relevance weight 1: review.relevance below 6 LOW_RELEVANCE
      pass when score >= 7.0
    }
    repair {
      rounds 3
      STAGE_FAILED -> rerun execute
    }

Right:

    gate quality on execute {
      hard all_done: every r in candidate.items: r.status != failed else STAGE_FAILED
      score relevance weight 1: review.relevance below 6 LOW_RELEVANCE
      pass when score >= 7.0
    }
    repair {
      rounds 3
      STAGE_FAILED  -> rerun execute
      LOW_RELEVANCE -> rerun execute with feedback
    }
"#;

const E009: &str = r#"E009: bad repair arm

A repair arm names an issue code that no gate emits (often a typo, which would leave the
real code without an action), or `rerun` targets a step that is not upstream of the
gate that failed, so rerunning it could not change what the gate judges.

Wrong:

    repair {
      rounds 3
      STAGE_FAILED  -> rerun deliver
      LOW_RELEVENCE -> rerun execute with feedback
    }

Right:

    repair {
      rounds 3
      STAGE_FAILED  -> rerun execute
      LOW_RELEVANCE -> rerun execute with feedback
    }
"#;

const E010: &str = r#"E010: invariant violated

An `invariant` that can be decided from the spec alone does not hold: `R has no tools`
while role `R` lists tools, or `only R uses T` while another role lists tool `T` or a
`tool` step calls `T` (`post = tool T(...)`) with no role at all.
Invariants state what must never change; fix the roles, not the invariant.

Wrong:

    role reviewer {
      model: strong  prompt: """Review {{ candidate.text }}"""  input: Candidate  output: Review
      tools: [web_search]  max_tool_calls: 4
    }
    invariant judges_are_toolless: reviewer has no tools

Right:

    role reviewer {
      model: strong  prompt: """Review {{ candidate.text }}"""  input: Candidate  output: Review
    }
    invariant judges_are_toolless: reviewer has no tools
"#;

const E011: &str = r#"E011: a judge holds a tool that changes the world

A role whose output is read by a gate is a judge. A judge must not act: it may hold
tools whose effect is `read`, never `write` or `external`, or judging a candidate could
publish, pay or delete something on the way.

Wrong:

    tool publish { input: Post  output: Receipt  effect: external }
    role reviewer {
      model: strong  prompt: """Review {{ candidate.text }}"""  input: Candidate  output: Review
      tools: [publish]  max_tool_calls: 2
    }
    gate quality on execute {
      score relevance weight 1: review.relevance below 6 LOW_RELEVANCE
      pass when score >= 7.0
    }

Right:

    tool web_search { input: Query  output: Hits  effect: read }
    role reviewer {
      model: strong  prompt: """Review {{ candidate.text }}"""  input: Candidate  output: Review
      tools: [web_search]  max_tool_calls: 2
    }
    gate quality on execute {
      score relevance weight 1: review.relevance below 6 LOW_RELEVANCE
      pass when score >= 7.0
    }
"#;

const E012: &str = r#"E012: finalize or gate cannot terminate properly

A `finalize` step calls a role whose output is not the built-in `Delivery` contract
(`{candidate_id: string, summary: string}`), so the runtime could not check that the
delivery is the candidate that was evaluated; or a flow has a `finalize` step but no
`gate` step, so no candidate is ever evaluated and nothing could be delivered; or a flow
has a `gate` step but no path from it to a `finalize` step or a terminal.

Wrong:

    role finalizer { model: default  prompt: """Sum up {{ candidate.text }}"""  input: Candidate  output: Post }
    deliver = finalize finalizer(best)  -> done

Right:

    role finalizer { model: default  prompt: """Sum up {{ candidate.text }}"""  input: Candidate  output: Delivery }
    deliver = finalize finalizer(best)  -> done

A `finalize` step needs a gate before it:

    execute = each t in plan.tasks: executor(t)  -> judge
    judge   = gate quality                       pass -> deliver  fail -> repair
    deliver = finalize finalizer(best)           -> done
"#;

const E013: &str = r#"E013: bad literal

A literal is well-formed but meaningless: a range whose minimum is above its maximum or
written `a..b` (write `a..=b`), a score weight that is zero or negative, a `below`
threshold outside the range of the score's value, a duration with an unknown unit
(use `ms`, `s`, `m` or `h`), or a count of zero where one is needed (`ask "…" max 0`,
`history: [...] last 0`, `processes: 0` in a tool's sandbox).

Wrong:

    contract Review { relevance: int(10..=0) }
    gate quality on review {
      score relevance weight 0: review.relevance below 6 LOW_RELEVANCE
      pass when score >= 7.0
    }

Right:

    contract Review { relevance: int(0..=10) }
    gate quality on review {
      score relevance weight 1: review.relevance below 6 LOW_RELEVANCE
      pass when score >= 7.0
    }
"#;

const E014: &str = r#"E014: template variable the role does not provide

A prompt template uses a variable that the role's input does not provide. A template
sees its input under the snake_case name of the input contract (`Task` -> `task`,
`WorkflowPlan` -> `workflow_plan`), and always `feedback`, `rules`, `tools`,
`output_schema` and `run`, and `history` when the role says `history: [steps]`; nothing
else.

Wrong:

    role executor {
      model: default
      prompt: """Carry out {{ plan.goal }}."""
      input: Task
      output: StageResult
    }

Right:

    role executor {
      model: default
      prompt: """Carry out {{ task.goal }}."""
      input: Task
      output: StageResult
    }
"#;

const E015: &str = r#"E015: task dependencies form a cycle or name a missing task

A static work list given to an `each` step has `depends_on` entries that form a cycle
(no task could ever start) or name an id that is not in the list.

Wrong:

    execute = each t in [
        {id: "a", goal: "draft", acceptance: [], depends_on: ["b"]},
        {id: "b", goal: "check", acceptance: [], depends_on: ["a"]}
      ]: executor(t)  -> done

Right:

    execute = each t in [
        {id: "a", goal: "draft", acceptance: [], depends_on: []},
        {id: "b", goal: "check", acceptance: [], depends_on: ["a"]}
      ]: executor(t)  -> done
"#;

const E016: &str = r#"E016: unreadable or malformed file

A file named by `import role "..."` or `prompt: file("...")` cannot be read, or a role
file's YAML front matter is malformed. Paths are relative to the directory of the spec
file, not to where `charter` runs. A file a prompt template includes (`{% include
"parts/tone.j2" %}`) is relative to the template that includes it, and must stay inside
the spec's directory: an absolute path, or a `../` that climbs out of it, is refused.

Wrong:

    role planner {
      model: default
      prompt: file("prompts/planer.md.j2")
      input: Request
      output: Plan
    }

Right:

    role planner {
      model: default
      prompt: file("prompts/planner.md.j2")
      input: Request
      output: Plan
    }
"#;

const E017: &str = r#"E017: a gate reads a step that cannot have run before it

A gate's rules, scores and `pass when` are evaluated when the flow reaches the `gate`
step (or, for a per-item `check`, while its `each` step runs). They can read only the
outputs of steps that can have run by then: steps with a path of transitions to the gate
step. A step that only runs after the gate (or on another branch) has no output when the
gate is evaluated, so the rule would judge nothing. The same holds for the gate's
subject (`gate G on STEP`): it must run before the gate step that evaluates it.

Wrong:

    gate validity on create {
      hard ran_ok: execute.kind == ok  else RUN_FAILED       // `execute` runs after `judge`
      pass when score >= 7
    }
    flow {
      create  = creator(plan)    -> check
      check   = checker(create)  -> judge
      judge   = gate validity    pass -> execute  fail -> repair
      execute = runner(create)   -> done
    }

Right:

    gate validity on create {
      hard no_errors: every i in check.issues: i.severity != error  else DESIGN_ERROR
      pass when score >= 7
    }
"#;

const E018: &str = r#"E018: a template uses a filter or test Charter does not provide, or loads a template

A prompt template is rendered with minijinja's built-in filters and tests, `tojson`, and
Charter's own `strip_mention`; a filter or test outside that list would fail every run at
the first call of the role, so the compiler rejects it where it is used (in a file the
template includes, too). Templates share text with `{% include "file" %}`, which the
compiler reads and checks; the name must be one string, known when the spec is compiled,
and a file may not include one of the files that include it (it would render without end).
`{% import %}`, `{% from %}` and `{% extends %}` are not supported: include the shared
piece, or define a `{% macro %}` in the template that uses it. The error's help lists
every filter or test a template may use.

Wrong:

    role writer {
      model: default
      prompt: """
        Plan: {{ plan | to_json }}
        {% import "shared/rules.md.j2" as rules %}
      """
      input: Plan
      output: Draft
    }

Right:

    role writer {
      model: default
      prompt: """
        Plan: {{ plan | tojson }}
        {% include "shared/rules.md.j2" %}
      """
      input: Plan
      output: Draft
    }
"#;

const W001: &str = r#"W001: unused contract

A contract is defined but no role, tool, field or flow uses it. It is probably left over
from an earlier version of the spec; remove it, or use it where it was meant to be used.

Wrong:

    contract Draft { text: string }
    contract Post { title: string  body: string }
    role writer { model: default  prompt: """Write about {{ request.goal }}."""  input: Request  output: Post }

Right:

    contract Post { title: string  body: string }
    role writer { model: default  prompt: """Write about {{ request.goal }}."""  input: Request  output: Post }
"#;

const W002: &str = r#"W002: unused tool

A tool is defined but no role lists it in `tools: [...]` and no `tool` step calls it, so
it can never run. Give it to the role that needs it, call it from a step
(`check = tool web_search(query)`), or remove it.

Wrong:

    tool web_search { input: Query  output: Hits  effect: read }
    role executor { model: default  prompt: """Do {{ task.goal }}."""  input: Task  output: StageResult }

Right:

    tool web_search { input: Query  output: Hits  effect: read }
    role executor {
      model: default  prompt: """Do {{ task.goal }}."""  input: Task  output: StageResult
      tools: [web_search]  max_tool_calls: 8
    }
"#;

const W003: &str = r#"W003: unused rules block

A `rules` block is defined but no role lists it in `rules: [...]`, so its text never
reaches a prompt, although its hash is still frozen into every run.

Wrong:

    rules core version "2026.11" { "Never fabricate a tool result." }
    role executor { model: default  prompt: """Do {{ task.goal }}."""  input: Task  output: StageResult }

Right:

    rules core version "2026.11" { "Never fabricate a tool result." }
    role executor {
      model: default  prompt: """Do {{ task.goal }}. {{ rules }}"""  input: Task  output: StageResult
      rules: [core]
    }
"#;

const W004: &str = r#"W004: tools without max_tool_calls

A role holds tools but sets no `max_tool_calls`, so one model call could loop on tool
calls without limit and its worst case cannot be bounded. Set the most tool calls one
model call may make.

Wrong:

    role executor {
      model: default  prompt: """Do {{ task.goal }}."""  input: Task  output: StageResult
      tools: [web_search]
    }

Right:

    role executor {
      model: default  prompt: """Do {{ task.goal }}."""  input: Task  output: StageResult
      tools: [web_search]  max_tool_calls: 8
    }
"#;

const W005: &str = r#"W005: score without `below`

A score rule has no `below THRESHOLD CODE`, so a low score never raises an issue and
repair can never target it: the gate can fail on its score with nothing to repair.

Wrong:

    gate quality on execute {
      score relevance weight 2: review.relevance
      pass when score >= 7.0
    }

Right:

    gate quality on execute {
      score relevance weight 2: review.relevance below 6 LOW_RELEVANCE
      pass when score >= 7.0
    }
"#;

const W006: &str = r#"W006: pass condition ignores the score

A gate has score rules but its `pass when` condition never reads `score`, so the scores
are computed and recorded but cannot make the gate fail. Use `score` in the condition,
or drop the score rules.

Wrong:

    gate quality on execute {
      score relevance weight 2: review.relevance below 6 LOW_RELEVANCE
      pass when review.verdict == PASS
    }

Right:

    gate quality on execute {
      score relevance weight 2: review.relevance below 6 LOW_RELEVANCE
      pass when review.verdict == PASS and score >= 7.0
    }
"#;

const W007: &str = r#"W007: worst case exceeds the budget

The worst case the compiler can prove (steps or wall time, from `repair.rounds`,
`retry`, `retries`, list bounds, `concurrency` and `timeout`s) does not fit the spec's own
`budget`, so some runs will be cut by the budget rather than end on their own. Tokens and
cost have no worst case the compiler can prove (a model's answer has no length bound in
the spec): only the budget caps them. `charter check --bounds` shows the worst case per
step. Raise the budget, or lower rounds, retries, timeouts or list bounds.

Wrong:

    role executor {
      model: default  prompt: """Do {{ task.goal }}."""  input: Task  output: StageResult
      timeout: 15m  retry: 3 backoff 2s
    }
    budget { wall 30m }

Right:

    role executor {
      model: default  prompt: """Do {{ task.goal }}."""  input: Task  output: StageResult
      timeout: 5m  retry: 1 backoff 2s
    }
    budget { wall 4h }
"#;

const W008: &str = r#"W008: unbounded fan-out

An `each` step iterates over a list whose contract gives no upper bound, so a model could
return a thousand items and the run would make a thousand calls. Bound the list type.

Wrong:

    contract Plan { goal: string  tasks: list<Task> }
    flow {
      plan    = planner(request)                                 -> execute
      execute = each t in plan.tasks: executor(t) concurrency 4  -> done
    }

Right:

    contract Plan { goal: string  tasks: list<Task>(1..=20) }
    flow {
      plan    = planner(request)                                 -> execute
      execute = each t in plan.tasks: executor(t) concurrency 4  -> done
    }
"#;

const W009: &str = r#"W009: unused model alias

A model alias is defined in `models { ... }` but no role uses it. Remove it, or point
the role that was meant to use it at it.

Wrong:

    models {
      default = "openai:gpt-4o-mini"
      strong  = "anthropic:claude-sonnet-4-5"
    }
    role reviewer { model: default  prompt: """Review {{ candidate.text }}"""  input: Candidate  output: Review }

Right:

    models {
      default = "openai:gpt-4o-mini"
      strong  = "anthropic:claude-sonnet-4-5"
    }
    role reviewer { model: strong  prompt: """Review {{ candidate.text }}"""  input: Candidate  output: Review }
"#;

const W010: &str = r#"W010: a role that receives feedback never reads it

The role runs again because something judged its work: a `rerun X with feedback` arm, a
repair `ask` whose answer reruns the judged step, a warning's arm, a per-item `check`'s
stage retry, `replan` (the entry step's role), or a `when` transition from an `ask`
step. The runtime passes the reason as `feedback` (the issues with their details, the
judges' outputs, the person's note), but this role's template never reads `feedback`, so
the model gets the same prompt as before and is likely to repeat the same answer.
`feedback` is `none` on a first call; `{{ feedback }}` on its own renders it as Markdown.

Wrong:

    role executor { model: default  prompt: """Do this: {{ task.goal }}"""  input: Task  output: StageResult }
    repair { rounds 2  INCOMPLETE -> rerun execute with feedback }

Right:

    role executor {
      model: default
      prompt: """
        Do this: {{ task.goal }}
        {% if feedback %}Your last attempt was sent back:
        {{ feedback }}{% endif %}
      """
      input: Task
      output: StageResult
    }
    repair { rounds 2  INCOMPLETE -> rerun execute with feedback }
"#;

const W011: &str = r#"W011: a finalize role never reads the candidate's id

A `finalize` role's `Delivery.candidate_id` must equal the id of the best evaluated
candidate (`c1`, `c2`, ...), or the delivery is refused (`delivery_mismatch`). Its
template never reads `candidate.id` (nor the whole `candidate`), so the model cannot
know which id to give.

Wrong:

    role finalizer { model: default  prompt: """Sum up {{ candidate.text }}"""  input: Candidate  output: Delivery }

Right:

    role finalizer {
      model: default
      prompt: """
        Sum up {{ candidate.text }}
        Set `candidate_id` to "{{ candidate.id }}".
      """
      input: Candidate
      output: Delivery
    }
"#;

const W012: &str = r#"W012: a role file key Charter does not know, read by nothing

A role file's front matter may carry keys of its own (a seed's `workflows`, `skillRules`,
a display `name`): Charter keeps them as `meta.KEY`, for the role's template and its
`permit` rules. This key is neither a key Charter knows nor read as `meta.KEY` by the
role, so it is likely a misspelt key (`tool`, not `tools`) or left over.

Wrong:

    ---
    id: runner
    input: Request
    output: Reply
    tool: [run_workflow]
    ---

Right:

    ---
    id: runner
    input: Request
    output: Reply
    tools: [run_workflow]
    workflows: [wf_1, wf_2]
    ---
    You may run only these workflows: {{ meta.workflows | join(", ") }}
"#;

const E019: &str = r#"E019: a tool's sandbox grants a write outside the project

A tool runs sandboxed (DESIGN §20): it may write only its own per-call directory (its
HOME and TMPDIR, always writable) and the paths its `sandbox { write: [...] }` grants.
Those paths must be inside the project: relative to its root, with no `..` that climbs
out of it. An absolute path, one under `~` (the user's home) or one that leaves the
project would let a tool a model drives change files elsewhere on the machine. Write
inside the project, or let the tool write in its own directory and read the result from
its output.

Wrong:

    tool fetch_page {
      input: Url  output: Page  effect: write
      sandbox { write: ["~/.cache/pages", "/tmp/out", "../shared"] }
    }

Right:

    tool fetch_page {
      input: Url  output: Page  effect: write
      sandbox { read: ["~/.cache/pages"]  write: ["out/pages"] }
    }
"#;

const W013: &str = r#"W013: a read-only tool whose sandbox lets it write

A tool with `effect: read` says it changes nothing: judges may hold it (E011), and a
provider retry may repeat its calls. Its `sandbox` grants `write` paths all the same, so
either the tool does write (say `effect: write`) or the grant is not needed (remove it;
the tool may still write its own directory, its HOME and TMPDIR).

Wrong:

    tool lint { input: Code  output: Report  effect: read  sandbox { write: ["out/"] } }

Right:

    tool lint { input: Code  output: Report  effect: read }
"#;

const W014: &str = r#"W014: a sandbox path that is empty or goes through `..`

A `read` or `write` path of a tool's sandbox is resolved against the project root (or
the user's home for `~/...`). An empty path names the whole project, and a `..` makes the
path say something other than what it grants: `data/../..` is the project's parent. Name
the directory itself: without `..` (`data/../out` is `out`), from `~` or absolutely for a
directory outside the project (reads only: a write outside the project is E019).

Wrong:

    tool search { input: Query  output: Hits  effect: read  sandbox { read: ["", "data/../index"] } }

Right:

    tool search { input: Query  output: Hits  effect: read  sandbox { read: ["index"] } }
"#;

const E020: &str = r#"E020: an MCP server that cannot be reached as declared

An `mcp` server is reached one of two ways: started as a process and spoken to over stdio
(`command: ["npx", "PACKAGE", ...]`, run in the project root), or connected to where it
already runs over streamable HTTP (`url: "http://HOST/mcp"`). A server says exactly one
of them, and the keys that go with it: `env` (the started process's environment) and
`sandbox` only with `command`, `headers` only with `url`. The command may not be empty,
the URL is an `http://` or `https://` address, an `env("VAR")` names an environment
variable, and `tools` says which of the server's tools the spec may use: a list, or `*`
for every tool it lists.

Wrong:

    mcp search {
      command: ["npx", "search-server"]
      url: "127.0.0.1:3001/mcp"
      headers: { Authorization: env("SEARCH_TOKEN") }
    }

Right:

    mcp search {
      url: "http://127.0.0.1:3001/mcp"
      headers: { Authorization: env("SEARCH_TOKEN") }
      tools: [web_search]
    }
"#;

const E021: &str = r#"E021: a tool that no MCP server provides

A tool of an MCP server is named `SERVER.TOOL` wherever a tool is named: in a role's
`tools`, `permit`, `tool_choice` and in invariants. SERVER must be an `mcp` item of the
spec, and TOOL one of the tools its `tools: [...]` allow-list names: the spec may use no
other tool of the server. Add the tool to the allow-list, or name one it holds. (Under
`tools: *` any name passes here; E024 checks it against what `charter.lock` says the
server lists.)

Wrong:

    mcp files { command: ["npx", "@modelcontextprotocol/server-filesystem", "data"]  tools: [read_text_file] }
    role reader { tools: [files.write_file, file.read_text_file]  max_tool_calls: 4 ... }

Right:

    mcp files { command: ["npx", "@modelcontextprotocol/server-filesystem", "data"]  tools: [read_text_file, write_file] }
    role reader { tools: [files.write_file, files.read_text_file]  max_tool_calls: 4 ... }
"#;

const E022: &str = r#"E022: an MCP server named like a tool

A `tool` and an `mcp` server share one namespace: `NAME` names the tool, `NAME.TOOL` a tool
of the server, and on the command line `--tool NAME=...` and `--mcp NAME=...` name both
alike. Give the server, or the tool, another name.

Wrong:

    tool search { input: Query  output: Hits  effect: read }
    mcp search { url: "http://127.0.0.1:3001/mcp"  tools: * }

Right:

    tool search { input: Query  output: Hits  effect: read }
    mcp web { url: "http://127.0.0.1:3001/mcp"  tools: * }
"#;

const E023: &str = r#"E023: an MCP server that charter.lock does not hold

`check` knows what an MCP server offers from `charter.lock`, at the project root, without
starting it: `charter lock` starts (or reaches) every server the specs declare, asks for its
tools, and writes their names, descriptions and input schemas there. A spec that declares a
server the lock does not hold, or a project that has no lock, cannot have its tools
checked, and a run could not compare the live server with what was reviewed. Run
`charter lock` and commit `charter.lock`.

Wrong:

    mcp files { command: ["npx", "@modelcontextprotocol/server-filesystem", "data"]  tools: [read_text_file] }
    (and no charter.lock, or one written before `files` was declared)

Right:

    mcp files { command: ["npx", "@modelcontextprotocol/server-filesystem", "data"]  tools: [read_text_file] }
    $ charter lock       # writes charter.lock with `files` and its tools; commit it
"#;

const E024: &str = r#"E024: a tool the locked MCP server does not list

A tool of an MCP server must be one the server offers, as `charter.lock` holds it: each
entry of the server's `tools: [...]` allow-list, and, for a server with `tools: *`, each
`SERVER.TOOL` a role's `tools` or an invariant names. The help suggests the closest tool
the lock lists. If the server offers the tool now (a newer version), run `charter lock`
again and review the change.

Wrong:

    mcp everything { command: ["npx", "@modelcontextprotocol/server-everything"]  tools: * }
    role helper { tools: [everything.ecko]  max_tool_calls: 2  ... }

Right:

    mcp everything { command: ["npx", "@modelcontextprotocol/server-everything"]  tools: * }
    role helper { tools: [everything.echo]  max_tool_calls: 2  ... }
"#;

const E025: &str = r#"E025: a permit reads an argument the MCP tool does not take

In `permit SERVER.TOOL when EXPR`, `args` is the call's arguments, which the tool's
`inputSchema` (as `charter.lock` holds it) describes. `args.X` must name one of the
schema's properties, and `args.X.Y` one of X's when X is an object with properties; a
misspelt name would never be set, so the rule would not test what it says. A schema that
allows other properties (`additionalProperties`, `patternProperties`, `anyOf`, ...) is not
checked below that level.

Wrong:

    permit everything.echo when len(args.mesage) < 200

Right:

    permit everything.echo when len(args.message) < 200
"#;

const E026: &str = r#"E026: charter.lock cannot be read

The spec declares an MCP server, so `check` reads the project's `charter.lock`, and it is
not a lock this build reads: not YAML, YAML of another form (a key it does not know, a
value of the wrong kind), or a newer version of the format. The message says where. The
file is written by `charter lock`, not by hand: write it again, or restore it from
version control.

Wrong:

    # charter.lock, edited by hand
    version: 1
    servers:
      files: [read_text_file

Right:

    $ charter lock       # writes charter.lock again from the servers
"#;

const W015: &str = r#"W015: an MCP server no role uses

An `mcp` server is declared, but no role lists one of its tools (`SERVER.TOOL`) in its
`tools`, so nothing would ever start or call it. Give a role one of its tools, or remove
the server.

Wrong:

    mcp files { command: ["npx", "@modelcontextprotocol/server-filesystem", "data"]  tools: [read_text_file] }
    role reader { tools: []  ... }

Right:

    mcp files { command: ["npx", "@modelcontextprotocol/server-filesystem", "data"]  tools: [read_text_file] }
    role reader { tools: [files.read_text_file]  max_tool_calls: 4  ... }
"#;

const W016: &str = r#"W016: charter.lock was made with another command or URL

The lock holds, per server, the command it was started with or the URL it was reached at,
and what that server offered. The spec now declares the server another way (another
package, version, argument or address), so the tools checked against the lock may not be
the tools the spec's server offers. Run `charter lock` to ask the server as declared.

Wrong:

    mcp files { command: ["npx", "-y", "@modelcontextprotocol/server-filesystem@2", "data"]  tools: [read_text_file] }
    (charter.lock made with ["npx", "-y", "@modelcontextprotocol/server-filesystem", "data"])

Right:

    mcp files { command: ["npx", "-y", "@modelcontextprotocol/server-filesystem@2", "data"]  tools: [read_text_file] }
    $ charter lock       # charter.lock now holds the command as declared
"#;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_code_has_a_titled_explanation_with_examples() {
        for code in Code::ALL {
            let text = explain(code);
            assert!(
                text.starts_with(&format!("{code}: ")),
                "{code}: the explanation must start with its code"
            );
            if code != Code::E000 {
                let wrong = text.find("\nWrong:\n");
                let right = text.find("\nRight:\n");
                assert!(
                    matches!((wrong, right), (Some(wrong), Some(right)) if wrong < right),
                    "{code}: needs a wrong example, then a right one"
                );
            }
        }
    }
}
