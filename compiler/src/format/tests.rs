//! Tests of the layout rules on small inputs.

use super::{format, lex};

/// Formats `text`, checks that formatting the result changes nothing, and returns it.
fn fmt(text: &str) -> String {
    let once =
        format(text).unwrap_or_else(|error| panic!("cannot format: {:?}", error.diagnostics));
    let twice =
        format(&once).unwrap_or_else(|error| panic!("cannot format: {:?}", error.diagnostics));
    assert_eq!(once, twice, "formatting is not idempotent");
    once
}

const HEADER: &str = "spec demo version \"1\"\n";

/// Formats `body` under a header and returns what follows the header.
fn body(body: &str) -> String {
    let formatted = fmt(&format!("{HEADER}{body}"));
    formatted
        .strip_prefix(HEADER)
        .unwrap_or(&formatted)
        .to_string()
}

#[test]
fn tokens_get_single_spaces_except_around_tight_punctuation() {
    assert_eq!(
        body("contract A{x:int(1..=5)?,y:list< string >(..=3)=[] }\n"),
        "contract A { x: int(1..=5)?, y: list<string>(..=3) = [] }\n"
    );
    assert_eq!(
        body("invariant i: always not ( run.tokens<=- 1 ) and f( a , { b : [ 1,2 ] } )\n"),
        "invariant i: always not (run.tokens <= -1) and f(a, { b: [1, 2] })\n"
    );
    assert_eq!(
        body("models{default=\"openai:x\" price 0.15/0.60 temperature 0.2}\n"),
        "models { default = \"openai:x\" price 0.15 / 0.60 temperature 0.2 }\n"
    );
}

#[test]
fn a_block_on_several_lines_gets_one_member_a_line_indented_by_two() {
    assert_eq!(
        body("role r {\n    model: default  input: A\n      output: B }\n"),
        "role r {\n  model: default\n  input: A\n  output: B\n}\n"
    );
}

#[test]
fn a_roles_messages_is_kept_and_laid_out_like_its_other_properties() {
    assert_eq!(
        body(
            "role r {\n    model: default  messages:chat // a conversation\n  input: A   output: B // one answer\n}\n"
        ),
        "role r {\n  model: default\n  messages: chat  // a conversation\n  input: A\n  output: B       // one answer\n}\n"
    );
    let one_line = "role r { model: default  messages: prompt  input: A  output: B }\n";
    assert_eq!(
        body("role r{model:default messages : prompt input:A output:B}\n"),
        one_line
    );
}

#[test]
fn a_one_line_block_stays_on_one_line_while_it_fits_and_holds_no_comment() {
    let short = "contract Param { name: string  value: string? }\n";
    assert_eq!(body(short), short);
    let long = format!(
        "contract Long {{ {} }}\n",
        (0..12)
            .map(|i| format!("field_{i}: string"))
            .collect::<Vec<_>>()
            .join("  ")
    );
    let printed = body(&long);
    assert!(
        printed.starts_with("contract Long {\n  field_0: string\n  field_1: string\n"),
        "{printed}"
    );
    assert_eq!(
        body("contract A { x: int /* why */ }\n"),
        "contract A {\n  x: int  /* why */\n}\n"
    );
    assert_eq!(body("contract Empty {  }\n"), "contract Empty {}\n");
}

#[test]
fn blank_lines_are_kept_one_at_most_and_never_at_the_edges_of_a_block() {
    assert_eq!(
        body(
            "\n\n// a section\n\n\ncontract B {\n\n  a: string\n\n\n  b: int\n\n}\ncontract C { c: int }\n"
        ),
        "\n// a section\n\ncontract B {\n  a: string\n\n  b: int\n}\ncontract C { c: int }\n"
    );
}

#[test]
fn comments_stay_where_they_were() {
    let text = "// before the item\n\
                contract B { // after the brace\n\
                \x20 // over a member\n\
                \x20 a: string // after a member\n\
                \x20 b: int /* inside */ // and after\n\
                \x20 // before the brace\n\
                } // after the item\n\
                /* at the end */\n";
    assert_eq!(
        body(text),
        "// before the item\n\
         contract B {  // after the brace\n\
         \x20 // over a member\n\
         \x20 a: string  // after a member\n\
         \x20 b: int     /* inside */ // and after\n\
         \x20 // before the brace\n\
         }  // after the item\n\
         /* at the end */\n"
    );
}

#[test]
fn trailing_comments_align_in_a_paragraph_unless_one_line_is_far_longer() {
    assert_eq!(
        body(
            "contract C {\n  a: int // one\n  bbbbbb: int   // two\n  c: int\n\n  d: int  // three\n}\n"
        ),
        "contract C {\n  a: int       // one\n  bbbbbb: int  // two\n  c: int\n\n  d: int  // three\n}\n"
    );
    let long = format!(
        "contract C {{\n  a: int // one\n  b: int // two\n  c: list<{}> // three\n}}\n",
        "X".repeat(60)
    );
    let printed = body(&long);
    assert!(
        printed.contains("  a: int  // one\n  b: int  // two\n"),
        "{printed}"
    );
}

#[test]
fn models_steps_arms_gates_repairs_and_invariants_align_into_columns() {
    let text = "models {\n  default = \"openai:gpt-4o-mini\" price 0.15 / 0.60\n  strong = \"anthropic:claude\" price 3 / 15\n}\n\
                flow {\n  plan = planner(request) -> write\n  write = writer(plan)\n    when write.ok -> judge\n    else -> failed \"no\"\n  judge = gate quality pass -> done fail -> repair\n}\n\
                gate quality on write {\n  hard ok: write.ok else NOT_OK\n  hard long_name: write.text != \"\" else EMPTY\n  pass when score >= 7\n}\n\
                repair {\n  rounds 2\n  NOT_OK -> rerun write\n  EMPTY, NOT_OK -> ask \"Go on?\"\n}\n\
                invariant a: writer has no tools\ninvariant bb: only writer uses publish\n";
    assert_eq!(
        body(text),
        "models {\n  default = \"openai:gpt-4o-mini\" price 0.15 / 0.60\n  strong  = \"anthropic:claude\"   price 3 / 15\n}\n\
         flow {\n  plan  = planner(request) -> write\n  write = writer(plan)\n            when write.ok -> judge\n            else          -> failed \"no\"\n  judge = gate quality     pass -> done  fail -> repair\n}\n\
         gate quality on write {\n  hard ok:        write.ok         else NOT_OK\n  hard long_name: write.text != \"\" else EMPTY\n  pass when score >= 7\n}\n\
         repair {\n  rounds 2\n  NOT_OK        -> rerun write\n  EMPTY, NOT_OK -> ask \"Go on?\"\n}\n\
         invariant a:  writer has no tools\ninvariant bb: only writer uses publish\n"
    );
}

#[test]
fn on_error_goes_on_a_line_of_its_own_under_the_transitions() {
    let text = "flow {\n  work = worker(request) -> done on_error -> recover\n  check = checker(work) when check.ok -> done else -> failed \"no\" on_error -> recover\n  recover = fixer(request) -> done\n}\n";
    assert_eq!(
        body(text),
        "flow {\n  work    = worker(request) -> done\n              on_error -> recover\n  check   = checker(work)\n              when check.ok -> done\n              else          -> failed \"no\"\n              on_error -> recover\n  recover = fixer(request)  -> done\n}\n"
    );
}

#[test]
fn one_line_tools_in_a_run_are_a_table_and_a_far_longer_cell_is_left_out() {
    assert_eq!(
        body(
            "tool a { input: A  output: B  effect: read }\ntool longer { input: Bbbbbb  output: C  effect: write }\n"
        ),
        "tool a      { input: A       output: B  effect: read }\ntool longer { input: Bbbbbb  output: C  effect: write }\n"
    );
    let printed = body(&format!(
        "flow {{\n  a = f(x) -> b\n  b = g(y) -> c\n  c = h({}) -> done\n}}\n",
        "x".repeat(60)
    ));
    assert!(
        printed.contains("  a = f(x) -> b\n  b = g(y) -> c\n"),
        "{printed}"
    );
}

#[test]
fn a_tools_sandbox_is_one_line_while_it_fits_and_one_entry_a_line_otherwise() {
    // In a one-line tool: on its line, its entries two spaces apart.
    assert_eq!(
        body("tool a{input:A output:B effect:read sandbox{read:[\"x\"] network:any}}\n"),
        "tool a { input: A  output: B  effect: read  sandbox { read: [\"x\"]  network: any } }\n"
    );
    assert_eq!(
        body("tool a { input: A  sandbox : required }\n"),
        "tool a { input: A  sandbox: required }\n"
    );
    // A tool too long for one line: the sandbox is a member, on one line while it fits.
    let long = "tool fetch_page { input: Url  output: Page  effect: read  timeout: 30s  sandbox { read: [\"data/\"]  network: any } }\n";
    assert_eq!(
        body(long),
        "tool fetch_page {\n  input: Url\n  output: Page\n  effect: read\n  timeout: 30s\n  sandbox { read: [\"data/\"]  network: any }\n}\n"
    );
    // A sandbox too long for its line: one entry a line, indented one more level.
    let wide = "tool fetch_page {\n  input: Url\n  sandbox { read: [\"data/\", \"~/.cache/pages\"]  write: [\"out/\"]  network: any  env: [GITHUB_TOKEN]  processes: 64 }\n}\n";
    assert_eq!(
        body(wide),
        "tool fetch_page {\n  input: Url\n  sandbox {\n    read: [\"data/\", \"~/.cache/pages\"]\n    write: [\"out/\"]\n    network: any\n    env: [GITHUB_TOKEN]\n    processes: 64\n  }\n}\n"
    );
    // Written over several lines, or holding a comment: one entry a line, comments kept.
    assert_eq!(
        body(
            "tool t {\n  input: A\n  sandbox {   read: [\"d\"] // data\n\n\n   network: any\n\n }  // after\n  effect: read\n}\n"
        ),
        "tool t {\n  input: A\n  sandbox {\n    read: [\"d\"]  // data\n\n    network: any\n  }  // after\n  effect: read\n}\n"
    );
    assert_eq!(
        body("tool t { input: A  sandbox { /* why */ network: any } }\n"),
        "tool t {\n  input: A\n  sandbox {  /* why */\n    network: any\n  }\n}\n"
    );
    assert_eq!(
        body("tool t { input: A  sandbox {} }\n"),
        "tool t { input: A  sandbox {} }\n"
    );
}

#[test]
fn block_strings_and_the_doc_are_kept_as_written() {
    let text = "spec demo version \"1\" \"\"\"\n   The doc,\n     indented.\n\"\"\"\nrules r {\n      \"\"\"\n      A rule\n        over lines.\n      \"\"\"\n}\n";
    assert_eq!(
        fmt(text),
        "spec demo version \"1\"\n\"\"\"\n   The doc,\n     indented.\n\"\"\"\nrules r {\n  \"\"\"\n      A rule\n        over lines.\n      \"\"\"\n}\n"
    );
}

#[test]
fn an_item_or_step_that_does_not_parse_is_kept_as_written() {
    let text = "contract   A { x: int }\ncontract B {  x int   \n  y: int }\ncontract   C { z: int }\nflow {\n  a = f(x)   -> b\n  b = = g(y)\n  c =   h(z) -> done\n}\n";
    assert_eq!(
        body(text),
        "contract A { x: int }\ncontract B {  x int\n  y: int }\ncontract C { z: int }\nflow {\n  a = f(x) -> b\n  b = = g(y)\n  c = h(z) -> done\n}\n"
    );
}

#[test]
fn a_file_whose_header_does_not_parse_or_with_an_open_comment_cannot_be_formatted() {
    for text in [
        "contract A { x: int }\n",
        "spec demo version \"1\"\n/* never closed\n",
    ] {
        let error = format(text).expect_err(text);
        assert_eq!(error.diagnostics.len(), 1, "{text}");
        assert_eq!(
            error.diagnostics.first().map(|d| d.code),
            Some(crate::Code::E001)
        );
    }
}

#[test]
fn windows_line_endings_and_tabs_become_canonical() {
    assert_eq!(
        body("contract A {\r\n\tx: int\r\n}\r\n"),
        "contract A {\n  x: int\n}\n"
    );
}

#[test]
fn the_guard_compares_tokens_and_comments_not_spacing() {
    assert_eq!(lex("a.b  ->c // x  \n"), lex("a . b -> c // x\n"));
    assert_ne!(lex("a b"), lex("ab"));
    assert_ne!(lex("a / / b"), lex("a // b"));
    assert_ne!(lex("\"a  b\""), lex("\"a b\""));
}

#[test]
fn the_guard_counts_no_part_on_a_spec_with_every_kind_of_item() {
    let text = "spec demo version \"1\"\nimport role \"r.md\" { permit t when x > 1 }\nsession S keep 3 { a: int }\nremember a = 1\nbudget { tokens 10  on_exhausted s }\ncontract A { x: int }\ntool t {\n  input: A  sandbox { read: [\"a\", \"\"], write: [\"o\"]  network: loopback  env: [K]  processes: 2  required: false }\n}\nmcp m { command: [\"x\", \"\"]  env: { A: env(\"B\"), C: \"\" }  tools: [a]  timeout: 1s  retry: 1 backoff 1s  sandbox: required }\nmcp n { url: \"http://h/mcp\"  headers: { X-A: \"1\" }  tools: * }\nflow {\n  s = r(request) -> done\n}\n";
    assert_eq!(super::guarded_parts(text), 0);
    assert!(fmt(text).contains("import role \"r.md\" { permit t when x > 1 }\n"));
}

#[test]
fn a_byte_order_mark_the_file_opened_with_is_kept() {
    let text = "\u{feff}spec x   version \"1\"\n";
    let formatted = fmt(text);
    assert_eq!(formatted, "\u{feff}spec x version \"1\"\n");
    assert_eq!(fmt(&formatted), formatted);
}

#[test]
fn an_mcp_server_is_laid_out_like_a_tool_its_maps_like_a_sandbox() {
    // Written on one line and fitting: one line, `*` and `env(...)` spaced as written.
    assert_eq!(
        body(
            "mcp search{url:\"http://h/mcp\" headers:{Authorization:env( \"T\" ),X-Client:\"c\"} tools:*}\n"
        ),
        "mcp search { url: \"http://h/mcp\"  headers: { Authorization: env(\"T\"), X-Client: \"c\" }  tools: * }\n"
    );
    assert_eq!(
        body(
            "mcp search{url:\"http://127.0.0.1:3001/mcp\" headers:{Authorization:env( \"TOKEN\" ),X-Client:\"charter\"} tools:*}\n"
        ),
        "mcp search {\n  url: \"http://127.0.0.1:3001/mcp\"\n  headers: { Authorization: env(\"TOKEN\"), X-Client: \"charter\" }\n  tools: *\n}\n"
    );
    // Too long for one line: one key a line, each map on its key's line while it fits.
    let long = "mcp files { command: [\"npx\", \"@modelcontextprotocol/server-filesystem\", \"data\"]  env: { LOG_LEVEL: \"warn\" }  tools: [read_text_file, list_directory]  timeout: 30s  retry: 1 backoff 1s  sandbox { read: [\"data/\"]  network: none } }\n";
    assert_eq!(
        body(long),
        "mcp files {\n  command: [\"npx\", \"@modelcontextprotocol/server-filesystem\", \"data\"]\n  env: { LOG_LEVEL: \"warn\" }\n  tools: [read_text_file, list_directory]\n  timeout: 30s\n  retry: 1 backoff 1s\n  sandbox { read: [\"data/\"]  network: none }\n}\n"
    );
    // A map written over several lines: one entry a line, comments kept.
    assert_eq!(
        body(
            "mcp m {\n  url: \"http://a/mcp\"\n  headers: {\n  Authorization: env(\"T\")  // the token\n  X-Client: \"c\" }\n  tools: [a]\n}\n"
        ),
        "mcp m {\n  url: \"http://a/mcp\"\n  headers: {\n    Authorization: env(\"T\")  // the token\n    X-Client: \"c\"\n  }\n  tools: [a]\n}\n"
    );
    // Tools of a server, named in a role, an invariant and a permit: one word each.
    assert_eq!(
        body(
            "role r { tools: [files.read_text_file , web]  tool_choice: files.read_text_file  permit files.read_text_file when len(args.path)<9 }\ninvariant i: only r uses files.read_text_file\n"
        ),
        "role r {\n  tools: [files.read_text_file, web]\n  tool_choice: files.read_text_file\n  permit files.read_text_file when len(args.path) < 9\n}\ninvariant i: only r uses files.read_text_file\n"
    );
}
