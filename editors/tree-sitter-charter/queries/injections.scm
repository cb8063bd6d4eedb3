; A role's prompt is a minijinja template: its text is Jinja (and Markdown around it).
(property
  key: "prompt"
  value: [
    (string (string_content) @injection.content)
    (block_string (string_content) @injection.content)
  ]
  (#set! injection.language "jinja"))

