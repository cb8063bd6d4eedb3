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

/// The name of the template `{% include "name" %}` in template `parent` loads: `name`
/// relative to `parent`'s directory, with `.` and `..` resolved by their text alone (a
/// `..` with nothing left to climb is kept, so a name that leaves the spec's directory
/// still says so). Template names are paths relative to the spec's directory, written
/// with `/`; an inline prompt is named as if it were a file there.
pub fn include_path(parent: &str, name: &str) -> String {
    let mut parts: Vec<&str> = Vec::new();
    let directory = parent
        .rsplit_once('/')
        .map_or("", |(directory, _)| directory);
    for part in directory.split('/').chain(name.split('/')) {
        match part {
            "" | "." => {}
            ".." if parts.last().is_some_and(|last| *last != "..") => {
                parts.pop();
            }
            other => parts.push(other),
        }
    }
    parts.join("/")
}

/// `environment` with the templates a prompt includes ([`include_path`] of each to its
/// text), resolved relative to the template that includes them.
pub fn add_includes<'a>(
    environment: &mut Environment<'a>,
    includes: impl IntoIterator<Item = (String, String)>,
) -> Result<(), minijinja::Error> {
    environment.set_path_join_callback(|name, parent| include_path(parent, name).into());
    for (name, text) in includes {
        environment.add_template_owned(name, text)?;
    }
    Ok(())
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
    fn an_include_is_named_relative_to_the_including_template() {
        assert_eq!(
            include_path("roles/a.md", "parts/tone.j2"),
            "roles/parts/tone.j2"
        );
        assert_eq!(
            include_path("roles/a.md", "../shared/./x.j2"),
            "shared/x.j2"
        );
        assert_eq!(include_path("inline", "x.j2"), "x.j2");
        assert_eq!(include_path("./p/a.j2", "../../out.txt"), "../out.txt");
        assert_eq!(include_path("a.j2", "../../out.txt"), "../../out.txt");
    }

    #[test]
    fn an_included_template_renders_in_place() {
        let mut environment = environment(unchanged);
        add_includes(
            &mut environment,
            [
                (
                    "roles/parts/tone.j2".to_string(),
                    "calm {{ x }}{% include \"../end.j2\" %}".to_string(),
                ),
                ("roles/end.j2".to_string(), ".".to_string()),
            ],
        )
        .expect("adds");
        environment
            .add_template_owned("roles/a.md", "be {% include \"parts/tone.j2\" %}")
            .expect("adds");
        let rendered = environment
            .get_template("roles/a.md")
            .and_then(|template| template.render(minijinja::context! { x => "now" }))
            .expect("renders");
        assert_eq!(rendered, "be calm now.");
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
