; Every block folds: items with braces, lists, long strings and comments.
[
  (import)
  (models)
  (rules)
  (field_list)
  (tool)
  (role)
  (gate)
  (repair)
  (budget)
  (flow)
  (step)
  (name_list)
  (list)
  (record)
  (block_string)
  (comment)
] @fold
