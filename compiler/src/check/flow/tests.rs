//! Tests of the flow checks: spec text in, `(code, line)` pairs out.
