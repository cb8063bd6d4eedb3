//! The one minijinja environment prompt templates render in: the runtime renders with it,
//! and the compiler checks templates against it, so the filters and tests a template may
//! use are the same in both (E018).

use minijinja::{AutoEscape, Environment, ErrorKind, UndefinedBehavior};

/// Charter's own filters, added to minijinja's built-ins by [`environment`].
pub const CHARTER_FILTERS: [&str; 1] = ["strip_mention"];

/// Every filter a prompt template may use: minijinja's built-ins (with its `json`
/// feature's `tojson`) and [`CHARTER_FILTERS`]. The compiler suggests from this list;
/// whether a filter exists is asked of [`environment`] itself ([`has_filter`]).
pub const FILTERS: [&str; 49] = [
    "abs",
    "attr",
    "batch",
    "bool",
    "capitalize",
    "chain",
    "count",
    "d",
    "default",
    "dictsort",
    "e",
    "escape",
    "first",
    "float",
    "format",
    "groupby",
    "indent",
    "int",
    "items",
    "join",
    "last",
    "length",
    "lines",
    "list",
    "lower",
    "map",
    "max",
    "min",
    "pprint",
    "reject",
    "rejectattr",
    "replace",
    "reverse",
    "round",
    "safe",
    "select",
    "selectattr",
    "slice",
    "sort",
    "split",
    "string",
    "strip_mention",
    "sum",
    "title",
    "tojson",
    "trim",
    "unique",
    "upper",
    "zip",
];

/// Every test a prompt template may use (`{% if x is defined %}`): minijinja's built-ins.
pub const TESTS: [&str; 22] = [
    "boolean",
    "defined",
    "divisibleby",
    "endingwith",
    "escaped",
    "even",
    "float",
    "int",
    "integer",
    "iterable",
    "lower",
    "mapping",
    "none",
    "number",
    "odd",
    "safe",
    "sameas",
    "sequence",
    "startingwith",
    "string",
    "undefined",
    "upper",
];

/// The environment prompt templates render in: no auto-escaping (a prompt is not HTML),
/// undefined attributes of undefined values are undefined (not errors), and
/// [`CHARTER_FILTERS`], implemented by the caller (the runtime owns mention matching, which
/// needs the spec's role names; the compiler, which never renders, may pass any function).
pub fn environment<F>(strip_mention: F) -> Environment<'static>
where
    F: Fn(&str) -> String + Send + Sync + 'static,
{
    let mut environment = Environment::new();
    environment.set_auto_escape_callback(|_| AutoEscape::None);
    environment.set_undefined_behavior(UndefinedBehavior::Chainable);
    environment.add_filter("strip_mention", move |text: String| strip_mention(&text));
    environment
}

/// Whether `environment` provides filter `name` (a filter called with no arguments fails
/// for another reason than being unknown, or succeeds).
pub fn has_filter(environment: &Environment<'_>, name: &str) -> bool {
    let mut state = environment.empty_state();
    !matches!(state.apply_filter(name, &[]), Err(error) if error.kind() == ErrorKind::UnknownFilter)
}

/// Whether `environment` provides test `name`.
pub fn has_test(environment: &Environment<'_>, name: &str) -> bool {
    let mut state = environment.empty_state();
    !matches!(state.perform_test(name, &[]), Err(error) if error.kind() == ErrorKind::UnknownTest)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn unchanged(text: &str) -> String {
        text.to_string()
    }

    #[test]
    fn every_listed_filter_and_test_is_in_the_environment() {
        let environment = environment(unchanged);
        for name in FILTERS {
            assert!(
                has_filter(&environment, name),
                "filter `{name}` is listed but missing"
            );
        }
        for name in TESTS {
            assert!(
                has_test(&environment, name),
                "test `{name}` is listed but missing"
            );
        }
    }

    #[test]
    fn an_unlisted_filter_or_test_is_not_in_the_environment() {
        let environment = environment(unchanged);
        assert!(!has_filter(&environment, "to_json"));
        assert!(!has_filter(&environment, "urlencode"));
        assert!(!has_test(&environment, "empty"));
    }

    #[test]
    fn tojson_renders_a_value_as_json() {
        let rendered = environment(unchanged)
            .render_str(
                "{{ x | tojson }}",
                minijinja::context! { x => vec!["a", "b"] },
            )
            .expect("renders");
        assert_eq!(rendered, r#"["a", "b"]"#);
    }
}
