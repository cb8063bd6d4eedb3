//! The expression interpreter: evaluates the compiler's `ExprIr` over JSON values (gate rules, scores, `when` conditions, invariants, step arguments).
//!
//! The names an expression reads come from an [`Env`] (the scheduler implements it over
//! its run state; [`Bindings`] is a ready-made one). Quantifier variables are bound by the
//! interpreter itself and shadow the environment.
//!
//! Semantics, beyond what the compiler's type check already guarantees:
//! - A path through a record reads the field; a missing field, or any field of `none`,
//!   is `none` (an optional field that is absent reads as `none`). A field of a list, a
//!   string or a number is an error.
//! - `==`/`!=` compare `int` and `float` by value and lists and records deeply; `none`
//!   is `null`; an enum variant is its name as a string. `<`, `<=`, `>`, `>=` order
//!   numbers with numbers and strings with strings; anything else (including `none`) is
//!   an error.
//! - `and`/`or` short-circuit and need `bool` operands; `not` needs a `bool`.
//! - `+ - *` of two ints is an int (overflow is an error); anything with a float, and
//!   every `/`, is a float; division by zero is an error.
//! - `len` of a list or string (in characters); `contains(list, x)` by equality,
//!   `contains(string, s)` by substring; `matches(s, re)` is a regex search (the `regex`
//!   crate's syntax); `sum` of a list of numbers (0 for an empty list; an int when every
//!   element is an int); `min`/`max` of a non-empty list of numbers or of strings.
//! - `every`/`some`/`count x in list: body` stop early where the result is known.
//!
//! Errors are values ([`EvalError`]) with a readable message; nothing here panics.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use charter_compiler::graph::{BinaryOpIr, BuiltinIr, ExprIr, NameIr, QuantifierIr, UnaryOpIr};
use serde_json::{Map, Value};

use crate::engine::mention::KnownNames;
use crate::engine::value::{Num, compare_values, describe, values_equal};

/// The largest compiled regex `matches` accepts, in bytes (the pattern comes from the spec).
const REGEX_SIZE_LIMIT: usize = 1 << 20;

/// Where an expression's names get their values.
pub trait Env {
    /// The value of `name`, or `None` when it has none here (a step that has not run in
    /// this round, `item` outside a per-item check, ...). Quantifier variables never
    /// reach this: the interpreter binds them; the `each` variable does (as a `Local`).
    fn get(&self, name: &NameIr) -> Option<&Value>;
}

/// A plain [`Env`]: a value for each kind of name, set by the caller.
#[derive(Clone, Debug, Default, PartialEq)]
///
/// The run's large values (the request, step outputs, candidates) are shared, not copied:
/// the scheduler builds bindings for every call and check, and the values do not change
/// while an expression is evaluated.
pub struct Bindings {
    pub request: Option<Arc<Value>>,
    /// Step outputs in the current round, by step name (a list for `each` steps); the
    /// map itself is shared with the run state until a name is set here.
    pub steps: Arc<BTreeMap<String, Arc<Value>>>,
    pub candidate: Option<Arc<Value>>,
    pub best: Option<Arc<Value>>,
    /// `{round, step_count, tokens, cost, elapsed, answered_by?}`.
    pub run: Option<Arc<Value>>,
    /// The conversation's state (`session`), in a spec that keeps one.
    pub session: Option<Arc<Value>>,
    pub score: Option<Value>,
    pub item: Option<Value>,
    /// The `by` role's verdict inside a per-item check, by role name.
    pub by_role: BTreeMap<String, Value>,
    /// Variables bound outside the expression (the `each` variable), by name.
    pub locals: BTreeMap<String, Value>,
}

impl Bindings {
    /// Sets the value of `name` (builder style).
    pub fn with(mut self, name: NameIr, value: Value) -> Self {
        self.set(name, value);
        self
    }

    /// Sets the value of `name`.
    pub fn set(&mut self, name: NameIr, value: Value) {
        match name {
            NameIr::Request => self.request = Some(Arc::new(value)),
            NameIr::Step(step) => {
                Arc::make_mut(&mut self.steps).insert(step, Arc::new(value));
            }
            NameIr::Candidate => self.candidate = Some(Arc::new(value)),
            NameIr::Best => self.best = Some(Arc::new(value)),
            NameIr::Run => self.run = Some(Arc::new(value)),
            NameIr::Session => self.session = Some(Arc::new(value)),
            NameIr::Score => self.score = Some(value),
            NameIr::Item => self.item = Some(value),
            NameIr::ByRole(role) => {
                self.by_role.insert(role, value);
            }
            NameIr::Local(local) => {
                self.locals.insert(local, value);
            }
        }
    }
}

impl Bindings {
    /// The value of `name` when it is held shared (the request, step outputs, the
    /// candidates, `run`, `session`), without a copy.
    pub fn shared(&self, name: &NameIr) -> Option<Arc<Value>> {
        match name {
            NameIr::Request => self.request.clone(),
            NameIr::Step(step) => self.steps.get(step).cloned(),
            NameIr::Candidate => self.candidate.clone(),
            NameIr::Best => self.best.clone(),
            NameIr::Run => self.run.clone(),
            NameIr::Session => self.session.clone(),
            NameIr::Score | NameIr::Item | NameIr::ByRole(_) | NameIr::Local(_) => None,
        }
    }
}

impl Env for Bindings {
    fn get(&self, name: &NameIr) -> Option<&Value> {
        match name {
            NameIr::Request => self.request.as_deref(),
            NameIr::Step(step) => self.steps.get(step).map(|value| &**value),
            NameIr::Candidate => self.candidate.as_deref(),
            NameIr::Best => self.best.as_deref(),
            NameIr::Run => self.run.as_deref(),
            NameIr::Session => self.session.as_deref(),
            NameIr::Score => self.score.as_ref(),
            NameIr::Item => self.item.as_ref(),
            NameIr::ByRole(role) => self.by_role.get(role),
            NameIr::Local(local) => self.locals.get(local),
        }
    }
}

/// Why an expression could not be evaluated. The message names the expression's part
/// (`` `review.notes` ``, `` `+` ``, `` `min` ``) and what it met.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum EvalError {
    #[error("`{name}` has no value here")]
    Unbound { name: String },
    #[error("`{path}` is {found}, which has no field `{field}`")]
    NoField {
        path: String,
        field: String,
        found: String,
    },
    #[error("{what} must be {expected}, but is {found}")]
    Type {
        what: String,
        expected: String,
        found: String,
    },
    #[error("cannot order {left} and {right}")]
    Unordered { left: String, right: String },
    #[error("division by zero")]
    DivisionByZero,
    #[error("`{op}` overflows: the result is too large")]
    Overflow { op: String },
    #[error("`{function}` of an empty list")]
    EmptyList { function: String },
    #[error("`{function}` takes {expected} argument(s) but is given {given}")]
    Arity {
        function: String,
        expected: usize,
        given: usize,
    },
    #[error("invalid pattern {pattern:?} for `matches`: {message}")]
    Regex { pattern: String, message: String },
}

/// Evaluates `expr` in `env`.
pub fn evaluate(expr: &ExprIr, env: &dyn Env) -> Result<Value, EvalError> {
    Interpreter {
        env,
        locals: Vec::new(),
        regexes: HashMap::new(),
    }
    .eval(expr)
}

/// [`evaluate`], sharing the value when `expr` is a bare name `bindings` holds shared: a
/// call's argument `plan` is the step's output itself, not a copy.
pub fn evaluate_shared(expr: &ExprIr, bindings: &Bindings) -> Result<Arc<Value>, EvalError> {
    if let ExprIr::Path { root, fields } = expr
        && fields.is_empty()
        && let Some(value) = bindings.shared(root)
    {
        return Ok(value);
    }
    evaluate(expr, bindings).map(Arc::new)
}

/// Whether `expr` reads `name` anywhere (a value that is costly to build, like `run`, is
/// built only for an expression that reads it).
pub fn mentions(expr: &ExprIr, name: &NameIr) -> bool {
    match expr {
        ExprIr::Path { root, .. } => root == name,
        ExprIr::Literal { .. } | ExprIr::Variant { .. } => false,
        ExprIr::List { items } => items.iter().any(|item| mentions(item, name)),
        ExprIr::Record { fields } => fields.values().any(|field| mentions(field, name)),
        ExprIr::Unary { operand, .. } => mentions(operand, name),
        ExprIr::Binary { lhs, rhs, .. } => mentions(lhs, name) || mentions(rhs, name),
        ExprIr::Call { args, .. } => args.iter().any(|arg| mentions(arg, name)),
        ExprIr::Quantifier { over, body, .. } => mentions(over, name) || mentions(body, name),
    }
}

/// Evaluates `expr` in `env` and requires a `bool` (a gate rule, `pass when`, a `when`
/// condition, an `always` invariant).
pub fn evaluate_bool(expr: &ExprIr, env: &dyn Env) -> Result<bool, EvalError> {
    let value = evaluate(expr, env)?;
    as_bool(&value, "the condition")
}

/// Evaluates `expr` in `env` and requires a number (a score), returned as a float.
pub fn evaluate_number(expr: &ExprIr, env: &dyn Env) -> Result<f64, EvalError> {
    let value = evaluate(expr, env)?;
    Num::from_value(&value)
        .map(Num::as_f64)
        .ok_or_else(|| type_error("the score", "a number", &value))
}

/// How a name is written in the spec, for messages.
pub fn name_text(name: &NameIr) -> &str {
    match name {
        NameIr::Request => "request",
        NameIr::Candidate => "candidate",
        NameIr::Best => "best",
        NameIr::Run => "run",
        NameIr::Session => "session",
        NameIr::Score => "score",
        NameIr::Item => "item",
        NameIr::Step(name) | NameIr::ByRole(name) | NameIr::Local(name) => name,
    }
}

struct Interpreter<'a> {
    env: &'a dyn Env,
    /// Quantifier variables, innermost last.
    locals: Vec<(String, Value)>,
    /// Patterns compiled so far (a `matches` inside a quantifier compiles once).
    regexes: HashMap<String, regex::Regex>,
}

impl Interpreter<'_> {
    fn eval(&mut self, expr: &ExprIr) -> Result<Value, EvalError> {
        match expr {
            ExprIr::Literal { value } => Ok(value.clone()),
            ExprIr::Variant { name } => Ok(Value::String(name.clone())),
            ExprIr::Path { root, fields } => self.path(root, fields),
            ExprIr::List { items } => items
                .iter()
                .map(|item| self.eval(item))
                .collect::<Result<Vec<_>, _>>()
                .map(Value::Array),
            ExprIr::Record { fields } => {
                let mut record = Map::new();
                for (key, value) in fields {
                    record.insert(key.clone(), self.eval(value)?);
                }
                Ok(Value::Object(record))
            }
            ExprIr::Unary { op, operand } => {
                let value = self.eval(operand)?;
                match op {
                    UnaryOpIr::Not => Ok(Value::Bool(!as_bool(&value, "the operand of `not`")?)),
                    UnaryOpIr::Neg => match Num::from_value(&value) {
                        Some(Num::Int(int)) => int
                            .checked_neg()
                            .map(Value::from)
                            .ok_or_else(|| EvalError::Overflow { op: "-".into() }),
                        Some(Num::Float(float)) => number(Num::Float(-float), "-"),
                        None => Err(type_error("the operand of `-`", "a number", &value)),
                    },
                }
            }
            ExprIr::Binary { op, lhs, rhs } => self.binary(*op, lhs, rhs),
            ExprIr::Call { function, args } => self.call(*function, args),
            ExprIr::Quantifier {
                quantifier,
                var,
                over,
                body,
            } => self.quantifier(*quantifier, var, over, body),
        }
    }

    fn lookup(&self, root: &NameIr) -> Option<&Value> {
        if let NameIr::Local(name) = root
            && let Some((_, value)) = self.locals.iter().rev().find(|(local, _)| local == name)
        {
            return Some(value);
        }
        self.env.get(root)
    }

    fn path(&self, root: &NameIr, fields: &[String]) -> Result<Value, EvalError> {
        // What the expression wrote so far (`review.notes`), built only for an error.
        let written = |depth: usize| {
            let mut text = name_text(root).to_string();
            for field in fields.iter().take(depth) {
                text.push('.');
                text.push_str(field);
            }
            text
        };
        let mut current = self
            .lookup(root)
            .ok_or_else(|| EvalError::Unbound { name: written(0) })?;
        for (depth, field) in fields.iter().enumerate() {
            current = match current {
                Value::Object(record) => match record.get(field) {
                    Some(value) => value,
                    None => return Ok(Value::Null),
                },
                Value::Null => return Ok(Value::Null),
                other => {
                    return Err(EvalError::NoField {
                        path: written(depth),
                        field: field.clone(),
                        found: describe(other),
                    });
                }
            };
        }
        Ok(current.clone())
    }

    fn binary(&mut self, op: BinaryOpIr, lhs: &ExprIr, rhs: &ExprIr) -> Result<Value, EvalError> {
        match op {
            BinaryOpIr::And | BinaryOpIr::Or => {
                let symbol = if op == BinaryOpIr::And { "and" } else { "or" };
                let what = format!("an operand of `{symbol}`");
                let left = as_bool(&self.eval(lhs)?, &what)?;
                if (op == BinaryOpIr::And) != left {
                    // `false and _` is false, `true or _` is true: the right side is not read.
                    return Ok(Value::Bool(left));
                }
                Ok(Value::Bool(as_bool(&self.eval(rhs)?, &what)?))
            }
            BinaryOpIr::Eq | BinaryOpIr::Ne => {
                let equal = values_equal(&self.eval(lhs)?, &self.eval(rhs)?);
                Ok(Value::Bool(equal == (op == BinaryOpIr::Eq)))
            }
            BinaryOpIr::Lt | BinaryOpIr::Le | BinaryOpIr::Gt | BinaryOpIr::Ge => {
                let left = self.eval(lhs)?;
                let right = self.eval(rhs)?;
                let ordering =
                    compare_values(&left, &right).ok_or_else(|| EvalError::Unordered {
                        left: describe(&left),
                        right: describe(&right),
                    })?;
                let holds = match op {
                    BinaryOpIr::Lt => ordering.is_lt(),
                    BinaryOpIr::Le => ordering.is_le(),
                    BinaryOpIr::Gt => ordering.is_gt(),
                    _ => ordering.is_ge(),
                };
                Ok(Value::Bool(holds))
            }
            BinaryOpIr::Add | BinaryOpIr::Sub | BinaryOpIr::Mul | BinaryOpIr::Div => {
                let symbol = match op {
                    BinaryOpIr::Add => "+",
                    BinaryOpIr::Sub => "-",
                    BinaryOpIr::Mul => "*",
                    _ => "/",
                };
                let what = format!("an operand of `{symbol}`");
                let left = self.eval(lhs)?;
                let left =
                    Num::from_value(&left).ok_or_else(|| type_error(&what, "a number", &left))?;
                let right = self.eval(rhs)?;
                let right =
                    Num::from_value(&right).ok_or_else(|| type_error(&what, "a number", &right))?;
                number(arithmetic(op, symbol, left, right)?, symbol)
            }
        }
    }

    /// The value of a call to a built-in function: its arity checked, its arguments
    /// evaluated in order, then the function applied to them.
    ///
    /// One piece: one arm per built-in function, each checking its own arguments;
    /// splitting would scatter the table of built-ins.
    fn call(&mut self, function: BuiltinIr, args: &[ExprIr]) -> Result<Value, EvalError> {
        let (name, arity) = match function {
            BuiltinIr::Len => ("len", 1),
            BuiltinIr::Contains => ("contains", 2),
            BuiltinIr::Matches => ("matches", 2),
            BuiltinIr::Sum => ("sum", 1),
            BuiltinIr::Min => ("min", 1),
            BuiltinIr::Max => ("max", 1),
            BuiltinIr::Mention => ("mention", 2),
            BuiltinIr::StripMention => ("strip_mention", 2),
            BuiltinIr::RoleNamed => ("role_named", 2),
        };
        if args.len() != arity {
            return Err(EvalError::Arity {
                function: name.into(),
                expected: arity,
                given: args.len(),
            });
        }
        let values = args
            .iter()
            .map(|arg| self.eval(arg))
            .collect::<Result<Vec<_>, _>>()?;
        let what = format!("the argument of `{name}`");
        match (function, values.as_slice()) {
            (BuiltinIr::Len, [value]) => match value {
                Value::String(text) => Ok(Value::from(text.chars().count())),
                Value::Array(items) => Ok(Value::from(items.len())),
                other => Err(type_error(&what, "a list or a string", other)),
            },
            (BuiltinIr::Contains, [haystack, needle]) => match (haystack, needle) {
                (Value::String(text), Value::String(part)) => {
                    Ok(Value::Bool(text.contains(part.as_str())))
                }
                (Value::String(_), other) => Err(type_error(
                    "the second argument of `contains` on a string",
                    "a string",
                    other,
                )),
                (Value::Array(items), needle) => Ok(Value::Bool(
                    items.iter().any(|item| values_equal(item, needle)),
                )),
                (other, _) => Err(type_error(
                    "the first argument of `contains`",
                    "a list or a string",
                    other,
                )),
            },
            (BuiltinIr::Matches, [text, pattern]) => {
                let Value::String(text) = text else {
                    return Err(type_error(
                        "the first argument of `matches`",
                        "a string",
                        text,
                    ));
                };
                let Value::String(pattern) = pattern else {
                    return Err(type_error("the pattern of `matches`", "a string", pattern));
                };
                if !self.regexes.contains_key(pattern) {
                    let regex = cached_regex(pattern)?;
                    self.regexes.insert(pattern.clone(), regex);
                }
                let matched = self
                    .regexes
                    .get(pattern)
                    .is_some_and(|regex| regex.is_match(text));
                Ok(Value::Bool(matched))
            }
            (BuiltinIr::Mention, [text, Value::Object(names)]) => match text {
                Value::String(text) => {
                    Ok(mention(text, &known_names(names)).map_or(Value::Null, Value::from))
                }
                Value::Null => Ok(Value::Null),
                other => Err(type_error(&what, "a string", other)),
            },
            (BuiltinIr::StripMention, [text, Value::Object(names)]) => match text {
                Value::String(text) => Ok(Value::from(strip_mention(text, &known_names(names)))),
                Value::Null => Ok(Value::from("")),
                other => Err(type_error(&what, "a string", other)),
            },
            (BuiltinIr::RoleNamed, [name, Value::Object(names)]) => match name {
                Value::String(name) => Ok(names
                    .get(name.as_str())
                    .or_else(|| {
                        names
                            .iter()
                            .find(|(known, _)| known.eq_ignore_ascii_case(name))
                            .map(|(_, id)| id)
                    })
                    .cloned()
                    .unwrap_or(Value::Null)),
                Value::Null => Ok(Value::Null),
                other => Err(type_error(&what, "a string", other)),
            },
            (BuiltinIr::Sum, [list]) => {
                let items = as_list(list, &what)?;
                let mut total = Num::Int(0);
                for item in items {
                    let item = Num::from_value(item).ok_or_else(|| {
                        type_error("an element of `sum`'s list", "a number", item)
                    })?;
                    total = arithmetic(BinaryOpIr::Add, "sum", total, item)?;
                }
                number(total, "sum")
            }
            (BuiltinIr::Min | BuiltinIr::Max, [list]) => {
                let items = as_list(list, &what)?;
                let mut best: Option<&Value> = None;
                for item in items {
                    if !matches!(item, Value::Number(_) | Value::String(_)) {
                        return Err(type_error(
                            &format!("an element of `{name}`'s list"),
                            "a number or a string",
                            item,
                        ));
                    }
                    best = Some(match best {
                        None => item,
                        Some(current) => {
                            let ordering = compare_values(item, current).ok_or_else(|| {
                                EvalError::Unordered {
                                    left: describe(item),
                                    right: describe(current),
                                }
                            })?;
                            let better = if function == BuiltinIr::Min {
                                ordering.is_lt()
                            } else {
                                ordering.is_gt()
                            };
                            if better { item } else { current }
                        }
                    });
                }
                best.cloned().ok_or_else(|| EvalError::EmptyList {
                    function: name.into(),
                })
            }
            _ => Err(EvalError::Arity {
                function: name.into(),
                expected: arity,
                given: values.len(),
            }),
        }
    }

    fn quantifier(
        &mut self,
        quantifier: QuantifierIr,
        var: &str,
        over: &ExprIr,
        body: &ExprIr,
    ) -> Result<Value, EvalError> {
        let keyword = match quantifier {
            QuantifierIr::Every => "every",
            QuantifierIr::Some => "some",
            QuantifierIr::Count => "count",
        };
        let list = self.eval(over)?;
        let items = as_list(&list, &format!("the list of `{keyword}`"))?;
        let what = format!("the body of `{keyword}`");
        let mut count: u64 = 0;
        for item in items {
            self.locals.push((var.to_string(), item.clone()));
            let result = self.eval(body);
            self.locals.pop();
            let holds = as_bool(&result?, &what)?;
            match quantifier {
                QuantifierIr::Every if !holds => return Ok(Value::Bool(false)),
                QuantifierIr::Some if holds => return Ok(Value::Bool(true)),
                QuantifierIr::Count if holds => count += 1,
                _ => {}
            }
        }
        Ok(match quantifier {
            QuantifierIr::Every => Value::Bool(true),
            QuantifierIr::Some => Value::Bool(false),
            QuantifierIr::Count => Value::from(count),
        })
    }
}

fn arithmetic(op: BinaryOpIr, symbol: &str, left: Num, right: Num) -> Result<Num, EvalError> {
    let overflow = || EvalError::Overflow { op: symbol.into() };
    if op == BinaryOpIr::Div {
        if right.as_f64() == 0.0 {
            return Err(EvalError::DivisionByZero);
        }
        return Ok(Num::Float(left.as_f64() / right.as_f64()));
    }
    if let (Num::Int(a), Num::Int(b)) = (left, right) {
        let result = match op {
            BinaryOpIr::Add => a.checked_add(b),
            BinaryOpIr::Sub => a.checked_sub(b),
            _ => a.checked_mul(b),
        };
        return result.map(Num::Int).ok_or_else(overflow);
    }
    let (a, b) = (left.as_f64(), right.as_f64());
    let result = match op {
        BinaryOpIr::Add => a + b,
        BinaryOpIr::Sub => a - b,
        _ => a * b,
    };
    if result.is_finite() {
        Ok(Num::Float(result))
    } else {
        Err(overflow())
    }
}

/// A number as a value; a float that is not finite is an overflow.
fn number(value: Num, symbol: &str) -> Result<Value, EvalError> {
    value
        .to_value()
        .ok_or_else(|| EvalError::Overflow { op: symbol.into() })
}

fn as_bool(value: &Value, what: &str) -> Result<bool, EvalError> {
    value
        .as_bool()
        .ok_or_else(|| type_error(what, "a bool", value))
}

fn as_list<'v>(value: &'v Value, what: &str) -> Result<&'v Vec<Value>, EvalError> {
    value
        .as_array()
        .ok_or_else(|| type_error(what, "a list", value))
}

fn type_error(what: &str, expected: &str, found: &Value) -> EvalError {
    EvalError::Type {
        what: what.into(),
        expected: expected.into(),
        found: describe(found),
    }
}

#[cfg(test)]
mod tests;

/// How many compiled patterns the process keeps before starting over.
const REGEX_CACHE_LIMIT: usize = 256;

/// `pattern` compiled (under [`REGEX_SIZE_LIMIT`]) once per process: gates evaluate
/// `matches()` with the same few patterns again and again. Patterns that do not
/// compile are not cached.
fn cached_regex(pattern: &str) -> Result<regex::Regex, EvalError> {
    static CACHE: std::sync::OnceLock<std::sync::Mutex<HashMap<String, regex::Regex>>> =
        std::sync::OnceLock::new();
    let cache = CACHE.get_or_init(|| std::sync::Mutex::new(HashMap::new()));
    if let Some(regex) = cache
        .lock()
        .ok()
        .and_then(|cache| cache.get(pattern).cloned())
    {
        return Ok(regex);
    }
    let regex = regex::RegexBuilder::new(pattern)
        .size_limit(REGEX_SIZE_LIMIT)
        .build()
        .map_err(|error| EvalError::Regex {
            pattern: pattern.to_string(),
            message: error.to_string(),
        })?;
    if let Ok(mut cache) = cache.lock() {
        if cache.len() >= REGEX_CACHE_LIMIT {
            cache.clear();
        }
        cache.insert(pattern.to_string(), regex.clone());
    }
    Ok(regex)
}

/// `mention(text)` under the spec's names: the known name `text` starts with, or none
/// (the rules are [`KnownNames::find`]'s).
pub fn mention(text: &str, names: &KnownNames) -> Option<String> {
    names.mention(text).map(str::to_string)
}

/// `strip_mention(text)` under the spec's names: the text without its mention and the
/// separator after it, or whole when it mentions no known name.
pub fn strip_mention(text: &str, names: &KnownNames) -> String {
    names.strip_mention(text)
}

/// The names of the lowered table `{name: id}` that `mention`, `strip_mention` and
/// `role_named` carry as their last argument.
fn known_names(table: &Map<String, Value>) -> KnownNames {
    KnownNames::new(table.keys().cloned())
}
