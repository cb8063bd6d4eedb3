//! Pathological inputs the fuzzer found (or could find): each must compile to diagnostics
//! and render, without overflowing the stack, panicking or taking quadratic time. No
//! timing is asserted; a regression shows up as a crash or a suite that stops finishing.

use charter_compiler::{Code, Compilation, NoFiles, compile, render};

/// A small valid spec whose invariant is `EXPRESSION`.
fn spec_with_invariant(expression: &str) -> String {
    format!(
        "spec deep version \"1\"\n\
         models {{ m = \"openai:gpt-4o-mini\" }}\n\
         contract Request {{ goal: string  n: int  ok: bool  items: list<int> }}\n\
         role planner {{\n  model: m\n  prompt: \"\"\"plan {{{{ request.goal }}}}\"\"\"\n  input: Request\n  output: Request\n}}\n\
         invariant i: always {expression}\n\
         flow {{\n  a = planner(request) -> done\n}}\n"
    )
}

/// Compiles `text`, renders its diagnostics both ways, and returns the compilation.
fn compile_and_render(text: &str) -> Compilation {
    let compilation = compile("test.charter", text, &NoFiles);
    let shown = render::text(&compilation.diagnostics, &compilation.sources, false);
    let json = render::json(&compilation.diagnostics, &compilation.sources);
    assert_eq!(json.lines().count(), compilation.diagnostics.len());
    assert_eq!(shown.is_empty(), compilation.diagnostics.is_empty());
    if let Some(spec) = &compilation.spec {
        let serialized = serde_json::to_string(spec).unwrap_or_default();
        assert!(!serialized.is_empty());
        assert!(!charter_compiler::graph::to_mermaid(spec).is_empty());
        assert!(!charter_compiler::graph::to_dot(spec).is_empty());
        let _ = charter_compiler::bounds::compute(spec);
    }
    compilation
}

fn codes(compilation: &Compilation) -> Vec<Code> {
    compilation.diagnostics.iter().map(|d| d.code).collect()
}

#[test]
fn the_base_spec_compiles() {
    let compilation = compile_and_render(&spec_with_invariant("request.ok"));
    assert!(!compilation.has_errors(), "{:?}", compilation.diagnostics);
    assert!(compilation.spec.is_some());
}

#[test]
fn long_operator_chains_are_syntax_errors() {
    for (operator, operand) in [
        ("<", "request.n"),
        ("==", "request.n"),
        ("and", "request.ok"),
        ("or", "request.ok"),
        ("+", "request.n"),
        ("-", "request.n"),
        ("*", "request.n"),
        ("/", "request.n"),
    ] {
        let chain = format!(
            "{operand}{}",
            format!(" {operator} {operand}").repeat(20_000)
        );
        let compilation = compile_and_render(&spec_with_invariant(&chain));
        assert!(codes(&compilation).contains(&Code::E001), "`{operator}`");
        assert!(compilation.spec.is_none());
    }
}

#[test]
fn deep_nesting_is_a_syntax_error() {
    let deep = 100_000;
    for (open, inner, close) in [
        ("(", "request.ok", ")"),
        ("[", "1", "]"),
        ("{a: ", "1", "}"),
        ("every x in request.items: ", "true", ""),
        ("count x in request.items: ", "true", ""),
        ("not ", "request.ok", ""),
        ("-", "request.n", ""),
        ("len([", "1", "])"),
    ] {
        let expression = format!("{}{inner}{}", open.repeat(deep), close.repeat(deep));
        let compilation = compile_and_render(&spec_with_invariant(&expression));
        assert!(codes(&compilation).contains(&Code::E001), "`{open}`");
    }
    let deep_type = format!(
        "spec deep version \"1\"\ncontract C {{ a: {}string{} }}\n",
        "list<".repeat(deep),
        ">".repeat(deep)
    );
    assert!(codes(&compile_and_render(&deep_type)).contains(&Code::E001));
}

#[test]
fn many_operators_across_brackets_are_bounded() {
    // Each level is short, but together they would make a tree thousands deep.
    let level = format!("request.n{}", " + request.n".repeat(200));
    let mut expression = level.clone();
    for _ in 0..60 {
        expression = format!("({expression}) + {level}");
    }
    let compilation = compile_and_render(&spec_with_invariant(&format!("{expression} > 0")));
    assert!(
        compilation
            .diagnostics
            .iter()
            .any(|d| d.code == Code::E001 && d.message.contains("too many operators")),
        "{:?}",
        codes(&compilation)
    );
}

#[test]
fn the_deepest_accepted_expressions_go_through_every_stage() {
    // Within every bound, so the spec compiles: typing, lowering, serializing,
    // rendering and bounds all walk a tree 200 deep.
    let chain = format!("request.n{} > 0", " + request.n".repeat(200));
    let compilation = compile_and_render(&spec_with_invariant(&chain));
    assert!(!compilation.has_errors(), "{:?}", compilation.diagnostics);
    assert!(compilation.spec.is_some());
    let nested = format!("{}request.ok{}", "(".repeat(60), ")".repeat(60));
    let compilation = compile_and_render(&spec_with_invariant(&nested));
    assert!(!compilation.has_errors(), "{:?}", compilation.diagnostics);
    // Deeper than the typer goes: an error, not a crash.
    let mut expression = "request.n".to_string();
    for _ in 0..40 {
        expression = format!("({expression}){}", " + request.n".repeat(20));
    }
    let compilation = compile_and_render(&spec_with_invariant(&format!("{expression} > 0")));
    assert!(compilation.has_errors());
}

#[test]
fn thousands_of_syntax_errors_stop_at_a_hundred() {
    let text = format!("spec many version \"1\"\n{}", "role {\n".repeat(20_000));
    let compilation = compile_and_render(&text);
    let syntax_errors = codes(&compilation)
        .iter()
        .filter(|code| **code == Code::E001)
        .count();
    assert_eq!(syntax_errors, 101);
    assert!(
        compilation
            .diagnostics
            .iter()
            .any(|d| d.message.starts_with("too many syntax errors"))
    );
    let steps = format!(
        "spec many version \"1\"\nflow {{\n{}}}\n",
        "  a = ??\n".repeat(20_000)
    );
    let compilation = compile_and_render(&steps);
    assert!(compilation.diagnostics.len() <= 101);
}

#[test]
fn a_huge_one_line_input_renders() {
    let text = format!("spec big version \"1\" {}", "x ".repeat(2_000_000));
    let compilation = compile_and_render(&text);
    assert!(codes(&compilation).contains(&Code::E001));
}

#[test]
fn many_diagnostics_render() {
    let fields: String = (0..5_000)
        .map(|index| format!("  f{index}: Unknown{index}\n"))
        .collect();
    let text = format!("spec many version \"1\"\ncontract C {{\n{fields}}}\n");
    let compilation = compile_and_render(&text);
    assert!(
        codes(&compilation)
            .iter()
            .filter(|c| **c == Code::E002)
            .count()
            >= 5_000
    );
}

#[test]
fn a_long_chain_of_steps_is_checked() {
    let steps: String = (0..20_000)
        .map(|index| format!("  s{index} = planner(request) -> s{}\n", index + 1))
        .collect();
    let text = spec_with_invariant("request.ok").replace(
        "  a = planner(request) -> done\n",
        &format!("{steps}  s20000 = planner(request) -> done\n"),
    );
    let compilation = compile_and_render(&text);
    assert!(!compilation.has_errors(), "{:?}", codes(&compilation));
}

/// The base spec with `n`'s type replaced by `TYPE`.
fn spec_with_n_type(ty: &str) -> String {
    spec_with_invariant("request.ok").replace("n: int ", &format!("n: {ty} "))
}

#[test]
fn int_range_bounds_beyond_64_bits_are_e013() {
    for ty in [
        "int(0..=999999999999999999999999)",
        "int(-999999999999999999999999..=0)",
        "int(9223372036854775808..)",
        "list<int>(0..=99999999999999999999)",
    ] {
        let text = spec_with_n_type(ty);
        assert!(text.contains(ty));
        let compilation = compile_and_render(&text);
        assert_eq!(codes(&compilation), vec![Code::E013], "{ty}");
        assert!(
            compilation.diagnostics.iter().any(|d| d
                .message
                .contains("range bound does not fit a 64-bit integer")),
            "{ty}: {:?}",
            compilation.diagnostics
        );
    }
}

#[test]
fn the_full_i64_range_is_exact() {
    let text = spec_with_n_type("int(-9223372036854775808..=9223372036854775807)");
    let compilation = compile_and_render(&text);
    assert!(!compilation.has_errors(), "{:?}", compilation.diagnostics);
    let serialized = compilation
        .spec
        .as_ref()
        .and_then(|spec| serde_json::to_string(spec).ok())
        .unwrap_or_default();
    assert!(serialized.contains("-9223372036854775808"), "{serialized}");
    assert!(serialized.contains("9223372036854775807"), "{serialized}");
}
