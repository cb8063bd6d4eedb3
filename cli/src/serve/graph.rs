//! The flow graph the page draws (`GET /specs/{name}/graph.svg`): `charter graph --format dot`'s graph laid out to SVG on the server by `layout-rs`, each step's shape marked `data-step="NAME"` (and each end `data-end="NAME"`) so the page can light the running step and mark the visited ones.

use charter_compiler::CompiledSpec;
use layout::backends::svg::SVGWriter;
use layout::gv::{DotParser, GraphBuilder};

/// The spec's flow as an SVG document, or why it could not be drawn.
pub(crate) fn flow_svg(spec: &CompiledSpec) -> Result<String, String> {
    let dot = charter_compiler::graph::to_dot(spec);
    let names = node_names(spec, &dot);
    // The layout library asserts on graphs it cannot handle; a graph it cannot draw is a
    // page without a graph, never a server that stops.
    std::panic::catch_unwind(move || {
        let parsed = DotParser::new(&dot).process()?;
        let mut builder = GraphBuilder::new();
        builder.visit_graph(&parsed);
        let mut graph = builder.get();
        let handles: Vec<_> = graph.iter_nodes().collect();
        for (handle, mark) in handles.into_iter().zip(&names) {
            graph.element_mut(handle).properties = Some(mark.clone());
        }
        let mut svg = SVGWriter::new();
        graph.do_it(false, false, false, &mut svg);
        Ok(svg.finalize())
    })
    .unwrap_or_else(|_| Err("the flow graph could not be laid out".to_string()))
}

/// The attributes that mark each node of `dot`, in the order the DOT declares them (the
/// order the layout library makes its nodes in): `data-step="NAME"` for a step,
/// `data-end="NAME"` for an end of the flow.
fn node_names(spec: &CompiledSpec, dot: &str) -> Vec<String> {
    dot.lines()
        .filter_map(|line| {
            let line = line.trim_start();
            let (id, rest) = line.split_once(' ')?;
            (id.starts_with('n') && rest.starts_with("[label=")).then_some(id)
        })
        .map(|id| {
            let index: usize = id[1..].parse().unwrap_or(usize::MAX);
            let step = spec
                .flow
                .steps
                .iter()
                .find(|(_, node)| node.index() == index)
                .map(|(name, _)| name.clone());
            match step {
                Some(name) => format!("data-step=\"{}\"", attribute(&name)),
                None => format!("data-end=\"{}\"", attribute(id)),
            }
        })
        .collect()
}

/// `text` safe inside a double-quoted attribute.
fn attribute(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('"', "&quot;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}
