//! Typing of expressions (E002 for names not in scope, E004 for type errors), given a scope.

use std::collections::{BTreeMap, BTreeSet};

use crate::check::types::StepType;
use crate::check::types::ty::{Bounds, Contracts, Mismatch, Ty};
use crate::diagnostics::{Code, Diagnostic, Span, did_you_mean};
use crate::syntax::ast::{BinaryOp, Expr, ExprKind, Ident, QuantifierKind, UnaryOp};

/// The built-in functions expressions may call.
pub const BUILTIN_FUNCTIONS: [&str; 9] = [
    "len",
    "contains",
    "matches",
    "sum",
    "min",
    "max",
    "mention",
    "strip_mention",
    "role_named",
];

/// Where an expression is, for the help of a name that is not in scope there.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Place {
    /// A gate rule or `pass when`.
    Gate { pass_when: bool, per_item: bool },
    /// A flow step's arguments or `when` condition.
    Flow,
    /// An `invariant ... always`.
    Invariant,
    /// A contract field default.
    Default,
}

/// A name in scope and its type.
#[derive(Clone, Debug)]
pub struct Binding {
    pub name: String,
    pub ty: Ty,
}

/// Names that are not values but that an author may try to use as one, for better help.
#[derive(Clone, Debug, Default)]
pub struct NonValues {
    /// Role name -> a step that calls it (if any).
    pub roles: Vec<(String, Option<String>)>,
}

/// Types expressions against a scope, reporting into `diagnostics`.
pub struct Typer<'a> {
    pub contracts: &'a Contracts,
    pub non_values: &'a NonValues,
    pub diagnostics: &'a mut Vec<Diagnostic>,
    /// Spans of bare names that were read as enum variants.
    pub variants: &'a mut BTreeSet<Span>,
    /// The step names in scope (outermost, under `scope`): shared by every typer, so that
    /// making one costs nothing per step.
    pub steps: Option<&'a BTreeMap<&'a str, StepType>>,
    /// Names in scope over the steps, innermost last.
    pub scope: Vec<Binding>,
    pub place: Place,
    /// How deeply `infer` is nested, to stay clear of the stack on pathological input.
    pub depth: u32,
    pub too_deep: bool,
}

/// Expressions nested deeper than this are typed `any` (and reported once).
const MAX_DEPTH: u32 = 256;

impl std::fmt::Debug for Typer<'_> {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("Typer")
            .field("steps", &self.steps.map(BTreeMap::len))
            .field("scope", &self.scope)
            .field("place", &self.place)
            .finish()
    }
}

impl Typer<'_> {
    pub fn lookup(&self, name: &str) -> Option<&Ty> {
        self.scope
            .iter()
            .rev()
            .find(|binding| binding.name == name)
            .map(|binding| &binding.ty)
            .or_else(|| {
                self.steps
                    .and_then(|steps| steps.get(name))
                    .map(|step| &step.ty)
            })
    }

    /// Every name in scope, outermost first (a shadowed name appears more than once).
    fn names_in_scope(&self) -> impl Iterator<Item = &str> {
        self.steps
            .into_iter()
            .flat_map(|steps| steps.keys().copied())
            .chain(self.scope.iter().map(|binding| binding.name.as_str()))
    }

    pub fn push(&mut self, name: &str, ty: Ty) {
        self.scope.push(Binding {
            name: name.to_string(),
            ty,
        });
    }

    pub fn pop(&mut self) {
        self.scope.pop();
    }

    fn report(&mut self, diagnostic: Diagnostic) {
        self.diagnostics.push(diagnostic);
    }

    /// Types `expr` and requires a `bool`; `what` names the position ("a `when` condition").
    pub fn expect_bool(&mut self, expr: &Expr, what: &str) -> Ty {
        let ty = self.infer(expr, Some(&Ty::Bool));
        if !ty.is_bool() {
            self.report(
                Diagnostic::new(
                    Code::E004,
                    expr.span,
                    format!("{what} must be `bool`, but this is `{ty}`"),
                )
                .with_label(format!("this is `{ty}`"))
                .with_help("write a comparison or a test such as `x == y`, `len(x) > 0`"),
            );
        }
        ty
    }

    /// Types `expr` and requires a number.
    pub fn expect_number(&mut self, expr: &Expr, what: &str) -> Ty {
        let ty = self.infer(expr, None);
        if !ty.is_number() {
            self.report(
                Diagnostic::new(
                    Code::E004,
                    expr.span,
                    format!("{what} must be a number, but this is `{ty}`"),
                )
                .with_label(format!("this is `{ty}`")),
            );
            return Ty::Any;
        }
        ty
    }

    /// Whether `expr` is a single bare name that is not in scope (so possibly a variant).
    fn is_bare_unknown(&self, expr: &Expr) -> bool {
        match &expr.kind {
            ExprKind::Path(segments) => {
                segments.len() == 1
                    && segments
                        .first()
                        .is_some_and(|first| self.lookup(&first.name).is_none())
            }
            _ => false,
        }
    }

    /// The type of `expr`. `expected` is the type the context wants, used to read bare names
    /// as enum variants and to check record literals; it is not enforced here.
    pub fn infer(&mut self, expr: &Expr, expected: Option<&Ty>) -> Ty {
        if self.depth >= MAX_DEPTH {
            if !self.too_deep {
                self.too_deep = true;
                self.report(
                    Diagnostic::new(Code::E004, expr.span, "expression is nested too deeply")
                        .with_label("nested too deeply to check")
                        .with_help("split the expression into simpler parts"),
                );
            }
            return Ty::Any;
        }
        self.depth += 1;
        let ty = self.infer_inner(expr, expected);
        self.depth -= 1;
        ty
    }

    fn infer_inner(&mut self, expr: &Expr, expected: Option<&Ty>) -> Ty {
        match &expr.kind {
            ExprKind::Bool(_) => Ty::Bool,
            ExprKind::Int(value) => Ty::Int(Bounds::exact(*value as f64)),
            ExprKind::Float(value) => Ty::Float(Bounds::exact(*value)),
            ExprKind::Str(_) => Ty::String,
            ExprKind::None => Ty::None,
            ExprKind::List(items) => self.list(items, expected),
            ExprKind::Record(entries) => self.record(entries, expected),
            ExprKind::Path(segments) => self.path(segments, expected),
            ExprKind::Unary { op, operand } => match op {
                UnaryOp::Not => {
                    self.expect_bool(operand, "the operand of `not`");
                    Ty::Bool
                }
                UnaryOp::Neg => {
                    let ty = self.expect_number(operand, "the operand of `-`");
                    match ty {
                        Ty::Int(bounds) => Ty::Int(negate(bounds)),
                        Ty::Float(bounds) => Ty::Float(negate(bounds)),
                        other => other,
                    }
                }
            },
            ExprKind::Binary { op, lhs, rhs } => self.binary(*op, lhs, rhs, expr.span),
            ExprKind::Call { function, args } => self.call(function, args, expr.span),
            ExprKind::Quantifier {
                kind,
                var,
                over,
                body,
            } => {
                let over_ty = self.infer(over, None);
                let element = match over_ty.strip_optional().element() {
                    Some(element) => element,
                    None => {
                        self.report(
                            Diagnostic::new(
                                Code::E004,
                                over.span,
                                format!(
                                    "`{}` ranges over a list, but this is `{over_ty}`",
                                    quantifier_name(*kind)
                                ),
                            )
                            .with_label(format!("this is `{over_ty}`")),
                        );
                        Ty::Any
                    }
                };
                self.push(&var.name, element);
                self.expect_bool(body, "the body of a quantifier");
                self.pop();
                match kind {
                    QuantifierKind::Count => Ty::Int(Bounds::at_least(0.0)),
                    QuantifierKind::Every | QuantifierKind::Some => Ty::Bool,
                }
            }
        }
    }

    fn list(&mut self, items: &[Expr], expected: Option<&Ty>) -> Ty {
        let wanted = expected.and_then(|ty| ty.strip_optional().element());
        let mut element: Option<Ty> = None;
        for item in items {
            let mut ty = self.infer(item, wanted.as_ref());
            if let Some(contract) = wanted
                .as_ref()
                .filter(|wanted| wanted.contract_name().is_some())
                && matches!(ty, Ty::Record { name: None, .. })
            {
                self.expect_fits(&ty, contract, item.span, "this list's items");
                ty = contract.clone();
            }
            element = Some(match element {
                None => ty,
                Some(previous) => match self.unify(&previous, &ty) {
                    Some(joined) => joined,
                    None => {
                        self.report(
                            Diagnostic::new(
                                Code::E004,
                                item.span,
                                format!(
                                    "list items must have one type, but this is `{ty}` after `{previous}`"
                                ),
                            )
                            .with_label(format!("this is `{ty}`")),
                        );
                        Ty::Any
                    }
                },
            });
        }
        let count = items.len() as f64;
        Ty::List(
            Box::new(element.unwrap_or(Ty::Any)),
            Bounds {
                min: Some(count),
                max: Some(count),
            },
        )
    }

    /// The common type of two list items, if they have one.
    fn unify(&self, a: &Ty, b: &Ty) -> Option<Ty> {
        match (a, b) {
            (Ty::Any, _) | (_, Ty::Any) => Some(Ty::Any),
            (Ty::None, other) | (other, Ty::None) => Some(Ty::optional(other.clone())),
            (Ty::Int(x), Ty::Int(y)) => Some(Ty::Int(x.union(*y))),
            (
                Ty::Record {
                    name: None,
                    fields: first,
                },
                Ty::Record {
                    name: None,
                    fields: second,
                },
            ) => {
                // Records in one list may leave out defaulted fields: the union of their keys.
                let mut fields = first.clone();
                for (key, ty) in second {
                    match fields.iter_mut().find(|(have, _)| have == key) {
                        Some((_, have_ty)) => {
                            *have_ty = self.unify(have_ty, ty).unwrap_or(Ty::Any);
                        }
                        None => fields.push((key.clone(), ty.clone())),
                    }
                }
                Some(Ty::Record { name: None, fields })
            }
            (Ty::Int(x) | Ty::Float(x), Ty::Int(y) | Ty::Float(y)) => Some(Ty::Float(x.union(*y))),
            (Ty::Enum(x), Ty::Enum(y)) => {
                let mut variants = x.clone();
                for variant in y {
                    if !variants.contains(variant) {
                        variants.push(variant.clone());
                    }
                }
                Some(Ty::Enum(variants))
            }
            _ => {
                if self.contracts.mismatch(b, a).is_none() {
                    Some(a.clone())
                } else if self.contracts.mismatch(a, b).is_none() {
                    Some(b.clone())
                } else {
                    None
                }
            }
        }
    }

    fn record(&mut self, entries: &[(Ident, Expr)], expected: Option<&Ty>) -> Ty {
        let expected_fields = expected.and_then(|ty| self.contracts.fields_of(ty));
        let mut fields: Vec<(String, Ty)> = Vec::new();
        let mut seen: Vec<&Ident> = Vec::new();
        for (key, value) in entries {
            let wanted = expected_fields.as_ref().and_then(|fields| {
                fields
                    .iter()
                    .find(|(name, _)| *name == key.name)
                    .map(|(_, ty)| ty.clone())
            });
            let ty = self.infer(value, wanted.as_ref());
            if let Some(first) = seen.iter().find(|first| first.name == key.name) {
                let first_span = first.span;
                self.report(
                    Diagnostic::new(
                        Code::E003,
                        key.span,
                        format!("key `{}` is given twice in this record", key.name),
                    )
                    .with_label("second value")
                    .with_note(first_span, "first given here")
                    .with_help(format!("remove one of the two `{}` entries", key.name)),
                );
                continue;
            }
            seen.push(key);
            fields.push((key.name.clone(), ty));
        }
        Ty::Record { name: None, fields }
    }

    fn not_in_scope(&mut self, name: &Ident) {
        let mut diagnostic = Diagnostic::new(
            Code::E002,
            name.span,
            format!("unknown name `{}`", name.name),
        )
        .with_label("not in scope here");
        let role = self
            .non_values
            .roles
            .iter()
            .find(|(role, _)| *role == name.name);
        if let Some((_, step)) = role {
            diagnostic.message = format!("`{}` is a role, not a value", name.name);
            diagnostic = diagnostic.with_help(match step {
                Some(step) => {
                    format!("roles are not values; name the step that calls it: `{step}`")
                }
                None => "roles are not values; call the role in a flow step and name that step"
                    .to_string(),
            });
        } else if name.name == "score" {
            diagnostic = diagnostic.with_help("`score` is only in scope in a gate's `pass when`");
        } else if name.name == "item"
            && self.place == Place::Default
            && self.lookup("args").is_some()
        {
            // In a `permit`: the work item is the call's input, named as its template names it.
            let inputs: Vec<&str> = self
                .scope
                .iter()
                .map(|binding| binding.name.as_str())
                .filter(|name| *name != "args" && *name != "meta")
                .collect();
            diagnostic = diagnostic.with_help(match inputs.first() {
                Some(input) => format!(
                    "a `permit` sees the call's input under its template name: `{input}` (in an `each` step, the work item)"
                ),
                None => "a `permit` sees `args` and `meta`; this role has no input".to_string(),
            });
        } else if name.name == "item" {
            diagnostic = diagnostic
                .with_help("`item` is only in scope in a gate used by an `each ... check` step");
        } else if name.name == "session" && self.place != Place::Default {
            diagnostic = diagnostic.with_help(
                "`session` exists in a spec that keeps one between turns: declare `session Chat keep 20 { FIELD: TYPE? }`",
            );
        } else {
            let names: Vec<&str> = self.names_in_scope().collect();
            let mut help = did_you_mean(&name.name, names.iter().copied());
            if help.is_none() && names.is_empty() {
                help = Some("only literals are allowed here".to_string());
            } else if help.is_none() {
                let mut unique: Vec<&str> = names.clone();
                unique.sort_unstable();
                unique.dedup();
                help = Some(format!("names in scope here: {}", quoted(&unique)));
            }
            if let Some(help) = help {
                diagnostic = diagnostic.with_help(help);
            }
        }
        self.report(diagnostic);
    }

    fn path(&mut self, segments: &[Ident], expected: Option<&Ty>) -> Ty {
        let Some(first) = segments.first() else {
            return Ty::Any;
        };
        // A bare name is a variant only when it is not in scope (names in scope win, as in
        // the graph's lowering), and then it must be a variant of the enum it meets.
        if segments.len() == 1
            && self.lookup(&first.name).is_none()
            && let Some(Ty::Enum(variants)) = expected.map(Ty::strip_optional)
        {
            if variants.contains(&first.name) {
                self.variants.insert(first.span);
                return Ty::Enum(variants.clone());
            }
            let enum_ty = Ty::Enum(variants.clone());
            let mut diagnostic = Diagnostic::new(
                Code::E004,
                first.span,
                format!("`{}` is not a variant of `{enum_ty}`", first.name),
            )
            .with_label("not a variant");
            if let Some(help) = did_you_mean(&first.name, variants.iter().map(String::as_str)) {
                diagnostic = diagnostic.with_help(help);
            } else {
                diagnostic =
                    diagnostic.with_help(format!("the variants are {}", quoted_strings(variants)));
            }
            self.report(diagnostic);
            return Ty::Any;
        }
        let Some(mut ty) = self.lookup(&first.name).cloned() else {
            // Compared with something of unknown type (after another error), a bare name may
            // be a variant: reporting it would only repeat that error.
            if segments.len() == 1 && matches!(expected, Some(Ty::Any)) {
                return Ty::Any;
            }
            self.not_in_scope(first);
            return Ty::Any;
        };
        let mut written = first.name.clone();
        for segment in segments.iter().skip(1) {
            if ty.is_any() {
                return Ty::Any;
            }
            let was_optional = matches!(ty, Ty::Optional(_));
            // The common case, a field that exists, copies only that field's type.
            if let Some(Some(field_ty)) = self.contracts.field_type(&ty, &segment.name) {
                ty = if was_optional {
                    Ty::optional(field_ty)
                } else {
                    field_ty
                };
                written.push('.');
                written.push_str(&segment.name);
                continue;
            }
            let Some(fields) = self.contracts.fields_of(&ty) else {
                let message = format!(
                    "`{written}` is `{ty}`, which has no fields; `.{}` cannot be read",
                    segment.name
                );
                self.report(
                    Diagnostic::new(Code::E004, segment.span, message).with_label("no such field"),
                );
                return Ty::Any;
            };
            match fields.iter().find(|(name, _)| *name == segment.name) {
                Some((_, field_ty)) => {
                    ty = if was_optional {
                        Ty::optional(field_ty.clone())
                    } else {
                        field_ty.clone()
                    };
                }
                None => {
                    let mut diagnostic = Diagnostic::new(
                        Code::E004,
                        segment.span,
                        format!("no field `{}` on `{ty}`", segment.name),
                    )
                    .with_label(format!("`{written}` is `{ty}`"));
                    let names: Vec<&str> = fields.iter().map(|(name, _)| name.as_str()).collect();
                    diagnostic = diagnostic.with_help(
                        did_you_mean(&segment.name, names.iter().copied())
                            .unwrap_or_else(|| format!("`{ty}` has {}", quoted(&names))),
                    );
                    self.report(diagnostic);
                    return Ty::Any;
                }
            }
            written.push('.');
            written.push_str(&segment.name);
        }
        ty
    }

    fn binary(&mut self, op: BinaryOp, lhs: &Expr, rhs: &Expr, span: Span) -> Ty {
        match op {
            BinaryOp::And | BinaryOp::Or => {
                let what = if op == BinaryOp::And {
                    "an operand of `and`"
                } else {
                    "an operand of `or`"
                };
                self.expect_bool(lhs, what);
                self.expect_bool(rhs, what);
                Ty::Bool
            }
            BinaryOp::Eq | BinaryOp::Ne => {
                let (left, right) = if self.is_bare_unknown(lhs) && !self.is_bare_unknown(rhs) {
                    let right = self.infer(rhs, None);
                    (self.infer(lhs, Some(&right)), right)
                } else {
                    let left = self.infer(lhs, None);
                    (left.clone(), self.infer(rhs, Some(&left)))
                };
                if !self.contracts.comparable(&left, &right) {
                    self.report(
                        Diagnostic::new(
                            Code::E004,
                            span,
                            format!("cannot compare `{left}` with `{right}`"),
                        )
                        .with_label("these types differ")
                        .with_help("compare values of one type (numbers with numbers, an enum with its variants written bare)")
                        .with_note(lhs.span, format!("this is `{left}`"))
                        .with_note(rhs.span, format!("this is `{right}`")),
                    );
                }
                Ty::Bool
            }
            BinaryOp::Lt | BinaryOp::Le | BinaryOp::Gt | BinaryOp::Ge => {
                let left = self.infer(lhs, None);
                let right = self.infer(rhs, None);
                let ok = |ty: &Ty| ty.strip_optional().is_number();
                let strings = matches!(left.strip_optional(), Ty::String)
                    && matches!(right.strip_optional(), Ty::String);
                if !(strings || ok(&left) && ok(&right)) {
                    self.report(
                        Diagnostic::new(
                            Code::E004,
                            span,
                            format!("cannot order `{left}` and `{right}`"),
                        )
                        .with_label("`<`, `<=`, `>`, `>=` compare numbers")
                        .with_help("compare a number with a number (a quoted `\"6\"` is a string; write `6`)")
                        .with_note(lhs.span, format!("this is `{left}`"))
                        .with_note(rhs.span, format!("this is `{right}`")),
                    );
                }
                Ty::Bool
            }
            BinaryOp::Add | BinaryOp::Sub | BinaryOp::Mul | BinaryOp::Div => {
                let symbol = match op {
                    BinaryOp::Add => '+',
                    BinaryOp::Sub => '-',
                    BinaryOp::Mul => '*',
                    _ => '/',
                };
                let what = format!("an operand of `{symbol}`");
                let left = self.expect_number(lhs, &what);
                let right = self.expect_number(rhs, &what);
                let bounds = match (left.bounds(), right.bounds()) {
                    (Some(a), Some(b)) => a.combine(b, symbol),
                    _ => Bounds::UNBOUNDED,
                };
                match (&left, &right) {
                    (Ty::Any, _) | (_, Ty::Any) => Ty::Any,
                    (Ty::Int(_), Ty::Int(_)) if symbol != '/' => Ty::Int(bounds),
                    _ => Ty::Float(bounds),
                }
            }
        }
    }

    fn arity(&mut self, function: &Ident, args: &[Expr], wanted: usize, span: Span) -> bool {
        if args.len() == wanted {
            return true;
        }
        let plural = if wanted == 1 { "" } else { "s" };
        self.report(
            Diagnostic::new(
                Code::E004,
                span,
                format!(
                    "`{}` takes {wanted} argument{plural} but is given {}",
                    function.name,
                    args.len()
                ),
            )
            .with_label("wrong number of arguments")
            .with_help(signature(&function.name)),
        );
        for arg in args {
            self.infer(arg, None);
        }
        false
    }

    fn bad_argument(&mut self, function: &Ident, arg: &Expr, ty: &Ty, wanted: &str) {
        self.report(
            Diagnostic::new(
                Code::E004,
                arg.span,
                format!("`{}` needs {wanted}, but this is `{ty}`", function.name),
            )
            .with_label(format!("this is `{ty}`"))
            .with_help(signature(&function.name)),
        );
    }

    /// The type of a call to a built-in function, reporting a wrong number or type of
    /// arguments, or an unknown function.
    fn call(&mut self, function: &Ident, args: &[Expr], span: Span) -> Ty {
        // One piece: one arm per built-in function, each checking its own arguments;
        // splitting would scatter the table of built-ins.
        match function.name.as_str() {
            "len" => {
                if !self.arity(function, args, 1, span) {
                    return Ty::Int(Bounds::at_least(0.0));
                }
                if let Some(arg) = args.first() {
                    let ty = self.infer(arg, None);
                    if !matches!(ty.strip_optional(), Ty::List(..) | Ty::String | Ty::Any) {
                        self.bad_argument(function, arg, &ty, "a list or a string");
                    }
                }
                Ty::Int(Bounds::at_least(0.0))
            }
            "contains" => {
                if !self.arity(function, args, 2, span) {
                    return Ty::Bool;
                }
                if let [haystack, needle] = args {
                    // `contains([ok, partial], r.status)`: a literal list's bare names are
                    // read against the needle's type, so they can be variants.
                    if matches!(haystack.kind, ExprKind::List(_)) && !self.is_bare_unknown(needle) {
                        let wanted = self.infer(needle, None);
                        let hay = self.infer(haystack, Some(&Ty::list(wanted.clone())));
                        let element = hay.element().unwrap_or(Ty::Any);
                        if !self.contracts.comparable(&wanted, &element) {
                            self.bad_argument(
                                function,
                                needle,
                                &wanted,
                                &format!("a `{element}` to find in a `{hay}`"),
                            );
                        }
                        return Ty::Bool;
                    }
                    let hay = self.infer(haystack, None);
                    match hay.strip_optional() {
                        Ty::String => {
                            let ty = self.infer(needle, Some(&Ty::String));
                            if !matches!(ty.strip_optional(), Ty::String | Ty::Any) {
                                self.bad_argument(
                                    function,
                                    needle,
                                    &ty,
                                    "a string to find in a string",
                                );
                            }
                        }
                        Ty::List(element, _) => {
                            let element = (**element).clone();
                            let ty = self.infer(needle, Some(&element));
                            if !self.contracts.comparable(&ty, &element) {
                                self.bad_argument(
                                    function,
                                    needle,
                                    &ty,
                                    &format!("a `{element}` to find in a `{hay}`"),
                                );
                            }
                        }
                        Ty::Any => {
                            self.infer(needle, None);
                        }
                        _ => {
                            self.bad_argument(function, haystack, &hay, "a list or a string");
                            self.infer(needle, None);
                        }
                    }
                }
                Ty::Bool
            }
            "matches" => {
                if !self.arity(function, args, 2, span) {
                    return Ty::Bool;
                }
                if let [text, pattern] = args {
                    let ty = self.infer(text, None);
                    if !matches!(ty.strip_optional(), Ty::String | Ty::Any) {
                        self.bad_argument(function, text, &ty, "a string");
                    }
                    if !matches!(pattern.kind, ExprKind::Str(_)) {
                        let ty = self.infer(pattern, None);
                        self.report(
                            Diagnostic::new(
                                Code::E004,
                                pattern.span,
                                "the pattern of `matches` must be a string literal",
                            )
                            .with_label(format!("this is `{ty}`, not a literal"))
                            .with_help(
                                "write the regular expression inline: `matches(x, \"[0-9]+\")`",
                            ),
                        );
                    }
                }
                Ty::Bool
            }
            "mention" | "strip_mention" | "role_named" => {
                let result = if function.name == "strip_mention" {
                    Ty::String
                } else {
                    Ty::optional(Ty::String)
                };
                if !self.arity(function, args, 1, span) {
                    return result;
                }
                if let Some(arg) = args.first() {
                    let ty = self.infer(arg, Some(&Ty::String));
                    let fits = match ty.strip_optional() {
                        Ty::String | Ty::Any => true,
                        // `role_named(mention(text))`: none in, none out.
                        Ty::None => function.name == "role_named",
                        _ => false,
                    };
                    if !fits {
                        self.bad_argument(function, arg, &ty, "a string");
                    }
                }
                result
            }
            "sum" | "min" | "max" => {
                if !self.arity(function, args, 1, span) {
                    return Ty::Any;
                }
                let Some(arg) = args.first() else {
                    return Ty::Any;
                };
                let ty = self.infer(arg, None);
                let Some(element) = ty.strip_optional().element() else {
                    self.bad_argument(function, arg, &ty, "a list");
                    return Ty::Any;
                };
                if function.name == "sum" {
                    match element {
                        Ty::Int(_) => Ty::Int(Bounds::UNBOUNDED),
                        Ty::Float(_) => Ty::Float(Bounds::UNBOUNDED),
                        Ty::Any => Ty::Any,
                        _ => {
                            self.bad_argument(function, arg, &ty, "a list of numbers");
                            Ty::Any
                        }
                    }
                } else {
                    element
                }
            }
            _ => {
                let mut diagnostic = Diagnostic::new(
                    Code::E002,
                    function.span,
                    format!("unknown function `{}`", function.name),
                )
                .with_label("not a built-in function");
                diagnostic = diagnostic.with_help(
                    did_you_mean(&function.name, BUILTIN_FUNCTIONS).unwrap_or_else(|| {
                        format!("the functions are {}", quoted(&BUILTIN_FUNCTIONS))
                    }),
                );
                self.report(diagnostic);
                for arg in args {
                    self.infer(arg, None);
                }
                Ty::Any
            }
        }
    }

    /// Checks that `actual` fits `expected`, reporting E004 at `span`.
    pub fn expect_fits(&mut self, actual: &Ty, expected: &Ty, span: Span, what: &str) {
        match self.contracts.mismatch(actual, expected) {
            None => {}
            Some(Mismatch::Plain) => self.report(
                Diagnostic::new(
                    Code::E004,
                    span,
                    format!("{what} is `{expected}`, but this is `{actual}`"),
                )
                .with_label(format!("this is `{actual}`")),
            ),
            Some(Mismatch::Fields(reasons)) => self.report(
                Diagnostic::new(
                    Code::E004,
                    span,
                    format!("{what} is `{expected}`, but this record does not fit it"),
                )
                .with_label(reasons.join("; ")),
            ),
        }
    }
}

fn negate(bounds: Bounds) -> Bounds {
    Bounds {
        min: bounds.max.map(|value| -value),
        max: bounds.min.map(|value| -value),
    }
}

fn quantifier_name(kind: QuantifierKind) -> &'static str {
    match kind {
        QuantifierKind::Every => "every",
        QuantifierKind::Some => "some",
        QuantifierKind::Count => "count",
    }
}

fn signature(function: &str) -> String {
    match function {
        "len" => "`len(list | string) -> int`",
        "contains" => "`contains(list<T>, T) -> bool` or `contains(string, string) -> bool`",
        "matches" => "`matches(string, \"regex\") -> bool`",
        "sum" => "`sum(list<int | float>) -> int | float`",
        "min" => "`min(list<T>) -> T`",
        "max" => "`max(list<T>) -> T`",
        "mention" => "`mention(string) -> string?` (the role name, id or role-file `name`, after the `@` a text starts with)",
        "strip_mention" => {
            "`strip_mention(string) -> string` (the text without its leading `@name` and separator)"
        }
        "role_named" => {
            "`role_named(string?) -> string?` (a role's id, by its id or role-file name)"
        }
        _ => "",
    }
    .to_string()
}

/// `a`, `b`, `c` with backticks.
pub fn quoted(names: &[&str]) -> String {
    names
        .iter()
        .map(|name| format!("`{name}`"))
        .collect::<Vec<_>>()
        .join(", ")
}

fn quoted_strings(names: &[String]) -> String {
    let names: Vec<&str> = names.iter().map(String::as_str).collect();
    quoted(&names)
}
