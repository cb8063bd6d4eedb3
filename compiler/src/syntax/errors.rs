//! The one place where a pest error becomes a diagnostic (E001), saying in plain words
//! what was expected and what was found.

use pest::error::{ErrorVariant, InputLocation};

use super::Rule;
use crate::diagnostics::{Code, Diagnostic, FileId, Span, did_you_mean};

/// Converts a pest error from parsing `text[offset..]` into an E001 diagnostic whose span
/// points at the offending token in `text`.
pub(crate) fn syntax_error(
    error: &pest::error::Error<Rule>,
    file: FileId,
    offset: usize,
    text: &str,
) -> Diagnostic {
    let relative = match error.location {
        InputLocation::Pos(position) => position,
        InputLocation::Span((start, _)) => start,
    };
    let position = (offset + relative).min(text.len());
    let token_end = token_end(text, position);
    let found = text.get(position..token_end).unwrap_or("");
    let span = Span::new(file, position, token_end);

    if let Some(diagnostic) = unterminated_string(text, position, file) {
        return diagnostic;
    }
    let mut expected: Vec<&'static str> = Vec::new();
    let mut limit = false;
    match &error.variant {
        ErrorVariant::ParsingError { positives, .. } => {
            for rule in positives {
                let name = readable(*rule);
                if !name.is_empty() && !expected.contains(&name) {
                    expected.push(name);
                }
            }
        }
        ErrorVariant::CustomError { message } => {
            limit = message.contains("limit");
        }
    }
    if limit {
        return Diagnostic::new(Code::E001, span, "this spec is nested too deeply to parse")
            .with_label("nesting too deep here")
            .with_help("split the expression or list into smaller parts");
    }
    // Operators are listed last: what the author most likely missed is the next word of
    // the construct, not a way to continue an expression.
    // Closing brackets come after the words that could continue the construct.
    expected.sort_by_key(|name| (is_operator(name), matches!(*name, "`}`" | "`)`" | "`]`")));
    let operators = expected.iter().filter(|name| is_operator(name)).count();
    if operators > 2 {
        expected.retain(|name| !is_operator(name));
        expected.push("an operator");
    }
    let item_keywords = expected
        .iter()
        .filter(|name| ITEM_NAMES.contains(name))
        .count();
    if item_keywords == ITEM_NAMES.len() {
        // Everything an item can start with: say so in two words.
        expected.retain(|name| !ITEM_NAMES.contains(name));
        expected.push("an item");
    }
    let message = match expected.as_slice() {
        [] => "unexpected input".to_string(),
        [one] => format!("expected {one}"),
        [first, second] => format!("expected {first} or {second}"),
        many => format!("expected one of {}", many.join(", ")),
    };
    let label = if found.is_empty() {
        "unexpected end of file".to_string()
    } else {
        format!("unexpected `{found}`")
    };
    let mut diagnostic = Diagnostic::new(Code::E001, span, message).with_label(label);
    if let Some(help) = help(&expected, found) {
        diagnostic = diagnostic.with_help(help);
    }
    diagnostic
}

/// A string whose closing quote is missing: pest can only say what it expected at the
/// opening quote, so this says what is wrong.
fn unterminated_string(text: &str, position: usize, file: FileId) -> Option<Diagnostic> {
    let rest = text.get(position..)?;
    if rest.starts_with("\"\"\"") {
        if rest.get(3..)?.contains("\"\"\"") {
            return None;
        }
        return Some(
            Diagnostic::new(
                Code::E001,
                Span::new(file, position, position + 3),
                "unterminated `\"\"\"` block",
            )
            .with_label("this block is never closed")
            .with_help("close it with `\"\"\"`"),
        );
    }
    if !rest.starts_with('"') || rest.starts_with("\"\"") {
        return None;
    }
    let line = rest.get(1..)?.split('\n').next().unwrap_or("");
    let mut escaped = false;
    for character in line.chars() {
        match (escaped, character) {
            (true, _) => escaped = false,
            (false, '\\') => escaped = true,
            (false, '"') => return None,
            _ => {}
        }
    }
    Some(
        Diagnostic::new(
            Code::E001,
            Span::new(file, position, position + 1),
            "unterminated string",
        )
        .with_label("this string is never closed on its line")
        .with_help("close it with `\"`; for text over several lines use a `\"\"\"` block"),
    )
}

/// The end of the token that starts at `position`: a whole word, or one character.
fn token_end(text: &str, position: usize) -> usize {
    let rest = text.get(position..).unwrap_or("");
    let word = rest
        .char_indices()
        .find(|(_, character)| !(character.is_alphanumeric() || *character == '_'))
        .map_or(rest.len(), |(index, _)| index);
    if word > 0 {
        return position + word;
    }
    position + rest.chars().next().map_or(0, char::len_utf8)
}

fn is_operator(name: &str) -> bool {
    matches!(
        name,
        "`and`"
            | "`or`"
            | "`.`"
            | "a comparison (`==`, `!=`, `<`, `<=`, `>`, `>=`)"
            | "`+` or `-`"
            | "`*` or `/`"
            | "an operator"
    )
}

/// The readable names of the words that start an item.
const ITEM_NAMES: [&str; 14] = [
    "`import`",
    "`models`",
    "`rules`",
    "`contract`",
    "`tool`",
    "`mcp`",
    "`role`",
    "`gate`",
    "`repair`",
    "`invariant`",
    "`budget`",
    "`session`",
    "`remember`",
    "`flow`",
];

/// A hint for common mistakes, from what was expected and what was found.
const NAMES_ARE_ASCII: &str = "names are ASCII (`[a-z_][a-z0-9_]*`)";

/// Whether `diagnostic`'s help is the one for a non-ASCII letter, which is more specific
/// than any help a caller would put in its place.
pub(crate) fn says_names_are_ascii(diagnostic: &Diagnostic) -> bool {
    diagnostic
        .help
        .as_deref()
        .is_some_and(|help| help.starts_with(NAMES_ARE_ASCII))
}

fn help(expected: &[&str], found: &str) -> Option<String> {
    let first = found.chars().next()?;
    if first.is_alphabetic() && !first.is_ascii() {
        return Some(format!(
            "{NAMES_ARE_ASCII}: `{first}` cannot be part of one"
        ));
    }
    if expected == ["an item"] {
        return Some(
            "an item starts with `import`, `models`, `rules`, `contract`, `tool`, `mcp`, `role`, `gate`, `repair`, `invariant`, `budget`, `session`, `remember` or `flow`"
                .to_string(),
        );
    }
    // A misspelt keyword: suggest the closest keyword that was expected.
    if first.is_ascii_alphabetic() {
        let keywords = expected.iter().filter_map(|name| {
            name.strip_prefix('`')
                .and_then(|rest| rest.strip_suffix('`'))
                .filter(|word| word.bytes().all(|b| b.is_ascii_lowercase() || b == b'_'))
        });
        if let Some(suggestion) = did_you_mean(found, keywords) {
            return Some(suggestion);
        }
    }
    if expected.contains(&"a name") && first.is_ascii_uppercase() {
        return Some(
            "names of roles, steps, tools, gates, rules and models are lower-case (`[a-z_][a-z0-9_]*`)"
                .to_string(),
        );
    }
    if expected.contains(&"a contract name") && first.is_ascii_lowercase() {
        return Some("contract names start with an upper-case letter, e.g. `Request`".to_string());
    }
    if expected.contains(&"an issue code") && first.is_ascii_lowercase() {
        return Some("issue codes are upper-case, e.g. `STAGE_FAILED`".to_string());
    }
    if expected.contains(&"a duration") && first.is_ascii_digit() {
        return Some(
            "a duration is a number glued to a unit: `250ms`, `30s`, `15m`, `2h`".to_string(),
        );
    }
    if expected.contains(&"a target") {
        return Some(
            "a target is a step name, `done`, `blocked \"reason\"` or `failed \"reason\"`"
                .to_string(),
        );
    }
    if expected.contains(&"a type") && first.is_ascii_lowercase() {
        let builtins = ["string", "bool", "int", "float", "list"];
        return Some(did_you_mean(found, builtins).unwrap_or_else(|| {
            "a type is `string`, `bool`, `int`, `float`, `list<T>`, `A | B` or a contract name"
                .to_string()
        }));
    }
    if found == ":"
        && (expected.contains(&"an integer")
            || expected.contains(&"a number")
            || expected.contains(&"a duration"))
    {
        return Some("budget entries and counts take no `:`, e.g. `tokens 500000`".to_string());
    }
    if expected.contains(&"`->`") && expected.contains(&"`when`") {
        return Some(
            "a step ends with where to go next: `-> target`, `when CONDITION -> target`, or `pass -> target fail -> target`"
                .to_string(),
        );
    }
    if expected.contains(&"`:`") && found == "=" {
        return Some("properties are written `name: value`".to_string());
    }
    if expected.contains(&"`=`") && found == ":" {
        return Some("steps and model aliases are written `name = ...`".to_string());
    }
    None
}

/// The plain-words name of a grammar rule, as shown in "expected ..." (empty for rules
/// that are never worth naming).
fn readable(rule: Rule) -> &'static str {
    // One piece: one arm per grammar rule worth naming; splitting would scatter the table.
    match rule {
        Rule::ident | Rule::has_no_tools | Rule::call_body | Rule::tool_ref => "a name",
        Rule::type_name => "a contract name",
        Rule::code | Rule::codes => "an issue code",
        Rule::bare_name => "a name",
        Rule::int | Rule::rounds => "an integer",
        Rule::number | Rule::signed_number | Rule::range_min | Rule::range_max => "a number",
        Rule::duration => "a duration",
        Rule::string | Rule::block_string | Rule::empty_string | Rule::doc => "a string",
        Rule::lbrace | Rule::record_lit => "`{`",
        Rule::rbrace => "`}`",
        Rule::lparen | Rule::args | Rule::paren => "`(`",
        Rule::rparen => "`)`",
        Rule::lbracket
        | Rule::ident_list
        | Rule::list_lit
        | Rule::tool_list
        | Rule::string_list => "`[`",
        Rule::rbracket => "`]`",
        Rule::langle => "`<`",
        Rule::rangle => "`>`",
        Rule::colon => "`:`",
        Rule::comma => "`,`",
        Rule::equals => "`=`",
        Rule::arrow | Rule::goto => "`->`",
        Rule::slash => "`/`",
        Rule::question => "`?`",
        Rule::pipe => "`|`",
        Rule::dot => "`.`",
        Rule::dotdot | Rule::dotdoteq => "`..` or `..=`",
        Rule::wildcard => "`_`",
        Rule::range => "a range such as `(1..=20)`",
        Rule::type_expr
        | Rule::enum_type
        | Rule::string_type
        | Rule::bool_type
        | Rule::int_type
        | Rule::float_type
        | Rule::list_type => "a type",
        Rule::header | Rule::kw_spec => "`spec`",
        Rule::kw_version => "`version`",
        Rule::import | Rule::kw_import => "`import`",
        Rule::kw_role | Rule::role => "`role`",
        Rule::models | Rule::kw_models => "`models`",
        Rule::model_entry => "a model alias",
        Rule::price | Rule::kw_price => "`price`",
        Rule::rules_block | Rule::kw_rules | Rule::prop_rules => "`rules`",
        Rule::contract | Rule::kw_contract => "`contract`",
        Rule::field => "a field",
        Rule::tool | Rule::kw_tool => "`tool`",
        Rule::mcp | Rule::kw_mcp => "`mcp`",
        Rule::kw_command | Rule::mcp_command => "`command`",
        Rule::kw_url | Rule::mcp_url => "`url`",
        Rule::kw_headers | Rule::mcp_headers => "`headers`",
        Rule::mcp_env => "`env`",
        Rule::mcp_tools => "`tools`",
        Rule::star => "`*`",
        Rule::header_map | Rule::env_map => "`{`",
        Rule::header_name => "a header name",
        Rule::secret_env => "`env`",
        Rule::gate | Rule::kw_gate | Rule::gate_body => "`gate`",
        Rule::kw_on => "`on`",
        Rule::repair | Rule::kw_repair | Rule::repair_target => "`repair`",
        Rule::invariant | Rule::kw_invariant => "`invariant`",
        Rule::budget | Rule::kw_budget => "`budget`",
        Rule::session | Rule::kw_session => "`session`",
        Rule::kw_keep => "`keep`",
        Rule::remember | Rule::kw_remember => "`remember`",
        Rule::import_props => "`{`",
        Rule::flow | Rule::kw_flow => "`flow`",
        Rule::kw_string => "`string`",
        Rule::kw_bool => "`bool`",
        Rule::kw_int => "`int`",
        Rule::kw_float => "`float`",
        Rule::kw_list => "`list`",
        Rule::kw_input | Rule::tool_input | Rule::prop_input => "`input`",
        Rule::kw_output | Rule::tool_output | Rule::prop_output => "`output`",
        Rule::kw_effect | Rule::tool_effect => "`effect`",
        Rule::effect => "`read`, `write` or `external`",
        Rule::kw_read => "`read`",
        Rule::kw_write => "`write`",
        Rule::kw_external => "`external`",
        Rule::kw_model | Rule::prop_model => "`model`",
        Rule::kw_prompt | Rule::prop_prompt => "`prompt`",
        Rule::kw_file | Rule::prompt_file => "`file`",
        Rule::kw_tools | Rule::prop_tools => "`tools`",
        Rule::kw_max_tool_calls | Rule::prop_max_tool_calls => "`max_tool_calls`",
        Rule::kw_timeout | Rule::prop_timeout | Rule::tool_timeout => "`timeout`",
        Rule::kw_retry | Rule::prop_retry | Rule::tool_retry => "`retry`",
        Rule::kw_history | Rule::prop_history => "`history`",
        Rule::kw_tool_choice | Rule::prop_tool_choice => "`tool_choice`",
        Rule::kw_retry_after_effects | Rule::prop_retry_after_effects => "`retry_after_effects`",
        Rule::kw_messages | Rule::prop_messages => "`messages`",
        Rule::kw_permit | Rule::prop_permit => "`permit`",
        Rule::kw_sandbox | Rule::tool_sandbox => "`sandbox`",
        Rule::sandbox_block => "`{`",
        Rule::sandbox_read => "`read`",
        Rule::sandbox_write => "`write`",
        Rule::kw_network | Rule::sandbox_network => "`network`",
        Rule::network => "`none`, `loopback` or `any`",
        Rule::kw_env | Rule::sandbox_env => "`env`",
        Rule::env_list | Rule::path_list => "`[`",
        Rule::env_name => "an environment variable name",
        Rule::kw_processes | Rule::sandbox_processes => "`processes`",
        Rule::kw_required | Rule::sandbox_required => "`required`",
        Rule::kw_backoff => "`backoff`",
        Rule::kw_hard => "`hard`",
        Rule::kw_warn => "`warn`",
        Rule::check_rule => "`hard` or `warn`",
        Rule::kw_score | Rule::score_rule => "`score`",
        Rule::kw_weight => "`weight`",
        Rule::kw_below | Rule::below => "`below`",
        Rule::kw_else | Rule::else_arm => "`else`",
        Rule::kw_pass | Rule::pass_when | Rule::pass_fail => "`pass`",
        Rule::kw_when | Rule::when_arm | Rule::when_next => "`when`",
        Rule::kw_rounds => "`rounds`",
        Rule::kw_no_progress | Rule::no_progress => "`no_progress`",
        Rule::repair_arm => "a repair arm (`CODE -> action` or `_ -> action`)",
        Rule::kw_rerun | Rule::rerun => "`rerun`",
        Rule::kw_with => "`with`",
        Rule::kw_feedback => "`feedback`",
        Rule::kw_replan | Rule::replan => "`replan`",
        Rule::kw_accept | Rule::accept => "`accept`",
        Rule::kw_block | Rule::block => "`block`",
        Rule::kw_fail | Rule::fail => "`fail`",
        Rule::kw_ask | Rule::ask | Rule::ask_body => "`ask`",
        Rule::kw_has => "`has`",
        Rule::kw_no => "`no`",
        Rule::kw_only | Rule::only_uses => "`only`",
        Rule::kw_uses => "`uses`",
        Rule::kw_always | Rule::always => "`always`",
        Rule::kw_tokens | Rule::budget_tokens => "`tokens`",
        Rule::kw_cost | Rule::budget_cost => "`cost`",
        Rule::kw_wall | Rule::budget_wall => "`wall`",
        Rule::kw_steps | Rule::budget_steps => "`steps`",
        Rule::kw_on_exhausted | Rule::budget_on_exhausted => "`on_exhausted`",
        Rule::kw_on_error | Rule::on_error => "`on_error`",
        Rule::kw_each | Rule::each_body => "`each`",
        Rule::kw_in => "`in`",
        Rule::kw_concurrency | Rule::concurrency => "`concurrency`",
        Rule::kw_check | Rule::item_check => "`check`",
        Rule::kw_by => "`by`",
        Rule::kw_retries => "`retries`",
        Rule::kw_finalize | Rule::finalize_body => "`finalize`",
        Rule::kw_done => "`done`",
        Rule::kw_blocked | Rule::blocked_target => "`blocked`",
        Rule::kw_failed | Rule::failed_target => "`failed`",
        Rule::target => "a target",
        Rule::step => "a step (`name = ...`)",
        Rule::kw_or => "`or`",
        Rule::kw_and => "`and`",
        Rule::bool_lit => "`true` or `false`",
        Rule::none_lit => "`none`",
        Rule::quantifier | Rule::quantifier_kw => "a quantifier",
        Rule::cmp_op => "a comparison (`==`, `!=`, `<`, `<=`, `>`, `>=`)",
        Rule::add_op => "`+` or `-`",
        Rule::mul_op => "`*` or `/`",
        // A prefix operator is never what was missing: "an expression" says it.
        Rule::neg | Rule::kw_not => "",
        Rule::expr | Rule::operand | Rule::reference => "an expression",
        Rule::record_field => "a record field (`name: value`)",
        _ => "",
    }
}
