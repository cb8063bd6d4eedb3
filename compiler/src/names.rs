//! The name conventions of the language shared by the checker, the runtime and the editor
//! tooling: how a contract's name (`WorkflowPlan`) becomes the variable a template, a
//! `permit` condition and the renderer see it under (`workflow_plan`); how a tool of an MCP
//! server is named (`files.read_text_file`).

/// The server and the tool of a name `SERVER.TOOL` (a tool of an `mcp` server, DESIGN §19);
/// `None` for a plain tool name.
pub fn mcp_tool(name: &str) -> Option<(&str, &str)> {
    name.split_once('.')
}

/// The name a template sees a contract under: `WorkflowPlan` -> `workflow_plan`,
/// `HTTPRequest` -> `http_request`.
pub fn snake_case(name: &str) -> String {
    let mut out = String::with_capacity(name.len() + 4);
    let mut previous: Option<char> = None;
    let mut chars = name.chars().peekable();
    while let Some(current) = chars.next() {
        if current.is_uppercase()
            && let Some(previous) = previous
        {
            let next = chars.peek().copied();
            let after_lower = previous.is_lowercase() || previous.is_ascii_digit();
            let acronym_end =
                previous.is_uppercase() && next.is_some_and(|next| next.is_lowercase());
            if (after_lower || acronym_end) && previous != '_' {
                out.push('_');
            }
        }
        if current.is_ascii() {
            out.push(current.to_ascii_lowercase());
        } else {
            out.extend(current.to_lowercase());
        }
        previous = Some(current);
    }
    out
}
