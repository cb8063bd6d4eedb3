; Inside braces and brackets, lines are indented one level; the closing one is not.
[
  (models)
  (rules)
  (field_list)
  (tool)
  (mcp)
  (secret_map)
  (sandbox)
  (role)
  (gate)
  (repair)
  (budget)
  (flow)
  (name_list)
  (tool_list)
  (string_list)
  (path_list)
  (env_list)
  (list)
  (record)
  (arguments)
] @indent.begin

[ "}" "]" ")" ] @indent.branch @indent.end
