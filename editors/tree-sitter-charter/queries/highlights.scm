; Highlights for Charter specs, with the capture names of Neovim, Zed and the tree-sitter
; CLI (helix/highlights.scm is this query with Helix's names: `cargo xtask editors --write`).
; A later pattern wins over an earlier one for the same node (as in Neovim and the
; tree-sitter CLI), so general patterns come first.

(identifier) @variable

((identifier) @variable.builtin
  (#any-of? @variable.builtin "request" "candidate" "best" "run" "item"))
(wildcard) @variable.builtin

; Literals

(string) @string
(block_string) @string
(escape_sequence) @string.escape
(number) @number
(signed_number) @number
(duration) @number
(boolean) @boolean
(none) @constant.builtin
(effect) @constant.builtin
(network) @constant.builtin
(env_name) @constant

; Names, by where they stand

(type_identifier) @type
(contract name: (type_identifier) @type.definition)
(session name: (type_identifier) @type.definition)
(primitive_type) @type.builtin
"list" @type.builtin
(variant) @constant
(code) @constant

(header name: (identifier) @module)
(rules name: (identifier) @module)
(mcp name: (identifier) @module)
(mcp_tool server: (identifier) @module)
(secret_name) @property
(role name: (identifier) @function)
(tool name: (identifier) @function)
(gate name: (identifier) @function)
(invariant name: (identifier) @function)
(check_rule name: (identifier) @function)
(score_rule name: (identifier) @function)
(step name: (identifier) @function)
(model name: (identifier) @variable)

(field name: (identifier) @property)
(record_field name: (identifier) @property)
(remember name: (identifier) @property)
(field_identifier) @property

(call role: (identifier) @function.call)
(each role: (identifier) @function.call)
(finalize role: (identifier) @function.call)
(tool_call tool: (identifier) @function.call)
(call_expression function: (identifier) @function.call)
(call_expression
  function: (identifier) @function.builtin
  (#any-of? @function.builtin "len" "contains" "matches" "sum" "min" "max"))

; Keywords

[
  "spec" "version" "import" "role" "models" "rules" "contract" "tool" "mcp" "gate" "repair"
  "invariant" "budget" "flow" "session" "remember"
] @keyword

[
  "price" "temperature" "top_p" "max_tokens" "seed" "idle_timeout" "output" "json_schema"
  "json_object" "prompt" "keep" "model" "input" "effect" "max_tool_calls" "timeout"
  "retry" "backoff" "tools" "history" "last" "tool_choice" "retry_after_effects" "messages"
  "file" "hard" "warn" "score" "weight" "below" "detail" "rounds" "no_progress" "feedback"
  "tokens" "cost" "wall" "steps" "on_exhausted" "max" "sandbox" "network" "env" "processes"
  "required" "command" "url" "headers"
] @keyword
; A sandbox's keys, `read` and `write` among them (an effect's are constants), and an MCP
; server's.
(sandbox_entry key: _ @keyword)
(mcp_entry key: _ @keyword)

[
  "on" "permit" "when" "else" "on_error" "pass" "fail" "rerun" "with" "replan" "accept" "block"
  "ask" "only" "uses" "always" "has" "no" "each" "in" "concurrency" "check" "by"
  "retries" "finalize" "done" "blocked" "failed" "every" "some" "count"
] @keyword
(branch) @keyword
(repair_target) @keyword

[ "and" "or" "not" ] @keyword.operator

; Operators and punctuation

[ "=" "==" "!=" "<=" ">=" "+" "-" "*" "/" "->" "|" "?" ".." "..=" ] @operator
(binary_expression operator: [ "<" ">" ] @operator)
(list_type [ "<" ">" ] @punctuation.bracket)
[ "{" "}" "(" ")" "[" "]" ] @punctuation.bracket
[ "," ":" "." ] @punctuation.delimiter
; `tools: *` of an MCP server: every tool it lists (after the operators, which hold `*`).
(all_tools "*" @constant.builtin)

; Last, so that nothing inside a comment is highlighted otherwise.
(comment) @comment
