//! The checker's types: what an expression or a contract field can hold, and the table of contracts.

use std::collections::BTreeMap;
use std::fmt;

use crate::check::Symbols;
use crate::diagnostics::Span;
use crate::syntax::ast::{RangeLit, TypeExpr, TypeKind};

/// Inclusive numeric bounds; `None` is unbounded on that side.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Bounds {
    pub min: Option<f64>,
    pub max: Option<f64>,
}

impl Bounds {
    pub const UNBOUNDED: Bounds = Bounds {
        min: None,
        max: None,
    };

    pub fn exact(value: f64) -> Bounds {
        Bounds {
            min: Some(value),
            max: Some(value),
        }
    }

    pub fn at_least(value: f64) -> Bounds {
        Bounds {
            min: Some(value),
            max: None,
        }
    }

    /// The bounds a range literal describes (an exclusive `a..b` is reported elsewhere and
    /// read as `a..`).
    pub fn from_range(range: Option<&RangeLit>) -> Bounds {
        match range {
            None => Bounds::UNBOUNDED,
            Some(range) => {
                let bounds = Bounds {
                    min: range.min.as_ref().map(|number| number.value),
                    max: if range.inclusive {
                        range.max.as_ref().map(|number| number.value)
                    } else {
                        None
                    },
                };
                // An empty range is reported (E013); read it as unbounded so nothing else is.
                match (bounds.min, bounds.max) {
                    (Some(min), Some(max)) if min > max => Bounds::UNBOUNDED,
                    _ => bounds,
                }
            }
        }
    }

    /// Whether `value` lies within the bounds.
    pub fn contains(self, value: f64) -> bool {
        self.min.is_none_or(|min| value >= min) && self.max.is_none_or(|max| value <= max)
    }

    /// Interval arithmetic for `+ - *`; anything else is unbounded.
    pub fn combine(self, other: Bounds, op: char) -> Bounds {
        match op {
            '+' => Bounds {
                min: add(self.min, other.min),
                max: add(self.max, other.max),
            },
            '-' => Bounds {
                min: add(self.min, other.max.map(|value| -value)),
                max: add(self.max, other.min.map(|value| -value)),
            },
            '*' => match (self.min, self.max, other.min, other.max) {
                (Some(a), Some(b), Some(c), Some(d)) => {
                    let products = [a * c, a * d, b * c, b * d];
                    let min = products.iter().copied().fold(f64::INFINITY, f64::min);
                    let max = products.iter().copied().fold(f64::NEG_INFINITY, f64::max);
                    Bounds {
                        min: Some(min).filter(|value| value.is_finite()),
                        max: Some(max).filter(|value| value.is_finite()),
                    }
                }
                _ => Bounds::UNBOUNDED,
            },
            _ => Bounds::UNBOUNDED,
        }
    }

    /// The smallest bounds covering both.
    pub fn union(self, other: Bounds) -> Bounds {
        Bounds {
            min: self.min.zip(other.min).map(|(a, b)| a.min(b)),
            max: self.max.zip(other.max).map(|(a, b)| a.max(b)),
        }
    }

    pub fn is_known(self) -> bool {
        self.min.is_some() || self.max.is_some()
    }
}

fn add(a: Option<f64>, b: Option<f64>) -> Option<f64> {
    a.zip(b)
        .map(|(a, b)| a + b)
        .filter(|value| value.is_finite())
}

/// Formats a number as written: `3` rather than `3.0` for whole numbers.
pub fn number(value: f64) -> String {
    if value.fract() == 0.0 && value.abs() < 1e15 {
        format!("{}", value as i64)
    } else {
        format!("{value}")
    }
}

impl fmt::Display for Bounds {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (self.min, self.max) {
            (None, None) => Ok(()),
            // A literal's exact value is noise in a type: `int`, not `int(3..=3)`.
            (Some(min), Some(max)) if min == max => Ok(()),
            (Some(min), None) => write!(formatter, "({}..)", number(min)),
            (None, Some(max)) => write!(formatter, "(..={})", number(max)),
            (Some(min), Some(max)) => write!(formatter, "({}..={})", number(min), number(max)),
        }
    }
}

/// The type of an expression or a contract field.
#[derive(Clone, Debug, PartialEq)]
pub enum Ty {
    String,
    Bool,
    Int(Bounds),
    Float(Bounds),
    List(Box<Ty>, Bounds),
    /// Enum variants as written.
    Enum(Vec<String>),
    /// A named contract (user-defined or built in); its fields are in [`Contracts`].
    Contract(String),
    /// A record whose fields are known here: record literals (`name` is `None`), and the
    /// built-in values `candidate`, `best`, `run` and gate step results.
    Record {
        name: Option<String>,
        fields: Vec<(String, Ty)>,
    },
    Optional(Box<Ty>),
    /// The type of the literal `none`.
    None,
    /// Unknown (after an error, or where nothing better is known); fits everything, so
    /// one mistake is reported once.
    Any,
}

impl Ty {
    pub fn list(element: Ty) -> Ty {
        Ty::List(Box::new(element), Bounds::UNBOUNDED)
    }

    pub fn optional(inner: Ty) -> Ty {
        match inner {
            Ty::Optional(_) | Ty::None | Ty::Any => inner,
            other => Ty::Optional(Box::new(other)),
        }
    }

    /// The type without its `?`.
    pub fn strip_optional(&self) -> &Ty {
        match self {
            Ty::Optional(inner) => inner,
            other => other,
        }
    }

    pub fn is_any(&self) -> bool {
        matches!(self, Ty::Any)
    }

    pub fn is_number(&self) -> bool {
        matches!(self, Ty::Int(_) | Ty::Float(_) | Ty::Any)
    }

    pub fn is_bool(&self) -> bool {
        matches!(self, Ty::Bool | Ty::Any)
    }

    /// Numeric bounds, when the type is a number.
    pub fn bounds(&self) -> Option<Bounds> {
        match self {
            Ty::Int(bounds) | Ty::Float(bounds) => Some(*bounds),
            _ => None,
        }
    }

    /// The element type of a list (`any` for `any`), or `None` when not a list.
    pub fn element(&self) -> Option<Ty> {
        match self {
            Ty::List(element, _) => Some((**element).clone()),
            Ty::Any => Some(Ty::Any),
            _ => None,
        }
    }

    /// The contract name, when the type is a named contract or a named record.
    pub fn contract_name(&self) -> Option<&str> {
        match self.strip_optional() {
            Ty::Contract(name) => Some(name),
            Ty::Record {
                name: Some(name), ..
            } => Some(name),
            _ => None,
        }
    }
}

impl fmt::Display for Ty {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Ty::String => formatter.write_str("string"),
            Ty::Bool => formatter.write_str("bool"),
            Ty::Int(bounds) => write!(formatter, "int{bounds}"),
            Ty::Float(bounds) => write!(formatter, "float{bounds}"),
            Ty::List(element, bounds) => write!(formatter, "list<{element}>{bounds}"),
            Ty::Enum(variants) => formatter.write_str(&variants.join(" | ")),
            Ty::Contract(name) => formatter.write_str(name),
            Ty::Record {
                name: Some(name), ..
            } => formatter.write_str(name),
            Ty::Record { name: None, fields } => {
                formatter.write_str("{")?;
                for (index, (key, ty)) in fields.iter().enumerate() {
                    if index > 0 {
                        formatter.write_str(", ")?;
                    }
                    write!(formatter, "{key}: {ty}")?;
                }
                formatter.write_str("}")
            }
            Ty::Optional(inner) => match **inner {
                Ty::Enum(_) => write!(formatter, "({inner})?"),
                _ => write!(formatter, "{inner}?"),
            },
            Ty::None => formatter.write_str("none"),
            Ty::Any => formatter.write_str("any"),
        }
    }
}

/// One field of a contract.
#[derive(Clone, Debug, PartialEq)]
pub struct FieldInfo {
    pub name: String,
    pub ty: Ty,
    /// Neither optional nor defaulted: a record literal must give it.
    pub required: bool,
    pub span: Option<Span>,
}

/// A contract's fields in the order written.
#[derive(Clone, Debug, PartialEq)]
pub struct ContractInfo {
    pub name: String,
    pub fields: Vec<FieldInfo>,
    pub span: Option<Span>,
}

impl ContractInfo {
    pub fn field(&self, name: &str) -> Option<&FieldInfo> {
        self.fields.iter().find(|field| field.name == name)
    }
}

/// Every contract by name, built-ins included.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Contracts {
    pub by_name: BTreeMap<String, ContractInfo>,
}

fn builtin(name: &str, fields: &[(&str, Ty, bool)]) -> ContractInfo {
    ContractInfo {
        name: name.to_string(),
        fields: fields
            .iter()
            .map(|(field, ty, required)| FieldInfo {
                name: (*field).to_string(),
                ty: ty.clone(),
                required: *required,
                span: None,
            })
            .collect(),
        span: None,
    }
}

/// The fields of a candidate (`candidate`, `best`, the `Candidate` contract) whose items
/// have type `item`.
pub fn candidate_fields(item: Ty) -> Vec<(String, Ty)> {
    vec![
        ("id".to_string(), Ty::String),
        ("round".to_string(), Ty::Int(Bounds::at_least(0.0))),
        ("items".to_string(), Ty::list(item)),
        ("text".to_string(), Ty::String),
        ("hash".to_string(), Ty::String),
        ("failed".to_string(), Ty::list(Ty::String)),
        ("skipped".to_string(), Ty::list(Ty::String)),
    ]
}

impl Contracts {
    pub fn build(symbols: &Symbols<'_>) -> Contracts {
        let mut by_name = BTreeMap::new();
        let mut candidate_info = builtin("Candidate", &[]);
        candidate_info.fields = candidate_fields(Ty::Any)
            .into_iter()
            .map(|(name, ty)| FieldInfo {
                name,
                ty,
                required: true,
                span: None,
            })
            .collect();
        by_name.insert("Candidate".to_string(), candidate_info);
        by_name.insert(
            "Delivery".to_string(),
            builtin(
                "Delivery",
                &[
                    ("candidate_id", Ty::String, true),
                    ("summary", Ty::String, true),
                ],
            ),
        );
        by_name.insert(
            "Answer".to_string(),
            builtin(
                "Answer",
                &[
                    ("approved", Ty::Bool, true),
                    ("note", Ty::optional(Ty::String), false),
                ],
            ),
        );
        for (name, contract) in &symbols.contracts {
            let fields = contract
                .fields
                .iter()
                .map(|field| FieldInfo {
                    name: field.name.name.clone(),
                    ty: lower(&field.ty, symbols),
                    required: !field.ty.optional && field.default.is_none(),
                    span: Some(field.name.span),
                })
                .collect();
            by_name.insert(
                (*name).to_string(),
                ContractInfo {
                    name: (*name).to_string(),
                    fields,
                    span: Some(contract.name.span),
                },
            );
        }
        Contracts { by_name }
    }

    pub fn get(&self, name: &str) -> Option<&ContractInfo> {
        self.by_name.get(name)
    }

    /// The fields of a record-like type (contract or record), if it has them.
    pub fn fields_of(&self, ty: &Ty) -> Option<Vec<(String, Ty)>> {
        match ty.strip_optional() {
            Ty::Contract(name) => self.get(name).map(|info| {
                info.fields
                    .iter()
                    .map(|field| (field.name.clone(), field.ty.clone()))
                    .collect()
            }),
            Ty::Record { fields, .. } => Some(fields.clone()),
            _ => None,
        }
    }

    /// The type of field `name` of a record-like type: `None` when `ty` has no fields,
    /// `Some(None)` when it has fields but not this one. Unlike [`Self::fields_of`], copies
    /// only the one field's type.
    pub fn field_type(&self, ty: &Ty, name: &str) -> Option<Option<Ty>> {
        match ty.strip_optional() {
            Ty::Contract(contract) => self.get(contract).map(|info| {
                info.fields
                    .iter()
                    .find(|field| field.name == name)
                    .map(|field| field.ty.clone())
            }),
            Ty::Record { fields, .. } => Some(
                fields
                    .iter()
                    .find(|(field, _)| field == name)
                    .map(|(_, ty)| ty.clone()),
            ),
            _ => None,
        }
    }

    /// Why a value of type `actual` cannot be used where `expected` is wanted, or `None`
    /// when it can.
    pub fn mismatch(&self, actual: &Ty, expected: &Ty) -> Option<Mismatch> {
        self.mismatch_depth(actual, expected, 0)
    }

    fn mismatch_depth(&self, actual: &Ty, expected: &Ty, depth: u32) -> Option<Mismatch> {
        if depth > 32 {
            return None;
        }
        let plain = || Some(Mismatch::Plain);
        match (actual, expected) {
            (Ty::Any, _) | (_, Ty::Any) => None,
            (Ty::None, Ty::Optional(_)) => None,
            (Ty::Optional(inner), Ty::Optional(wanted)) => {
                self.mismatch_depth(inner, wanted, depth + 1)
            }
            (_, Ty::Optional(wanted)) => self.mismatch_depth(actual, wanted, depth + 1),
            (Ty::String, Ty::String) | (Ty::Bool, Ty::Bool) => None,
            (Ty::Int(_), Ty::Int(_) | Ty::Float(_)) | (Ty::Float(_), Ty::Float(_)) => None,
            (Ty::List(element, _), Ty::List(wanted, _)) => self
                .mismatch_depth(element, wanted, depth + 1)
                .map(|inner| match inner {
                    Mismatch::Fields(reasons) => Mismatch::Fields(reasons),
                    Mismatch::Plain => Mismatch::Plain,
                }),
            (Ty::Enum(variants), Ty::Enum(wanted)) => {
                if variants.iter().all(|variant| wanted.contains(variant)) {
                    None
                } else {
                    plain()
                }
            }
            (Ty::Contract(name), Ty::Contract(wanted)) => {
                (name != wanted).then_some(Mismatch::Plain)
            }
            (
                Ty::Record {
                    name: Some(name), ..
                },
                Ty::Contract(wanted),
            ) => (name != wanted).then_some(Mismatch::Plain),
            (Ty::Record { name: None, fields }, Ty::Contract(wanted)) => {
                let info = self.get(wanted)?;
                let mut reasons = Vec::new();
                for (key, ty) in fields {
                    match info.field(key) {
                        None => reasons.push(format!("`{wanted}` has no field `{key}`")),
                        Some(field) => {
                            if self.mismatch_depth(ty, &field.ty, depth + 1).is_some() {
                                reasons.push(format!(
                                    "field `{key}` is `{}` but is given `{ty}`",
                                    field.ty
                                ));
                            }
                        }
                    }
                }
                for field in &info.fields {
                    if field.required && !fields.iter().any(|(key, _)| *key == field.name) {
                        reasons.push(format!("missing field `{}`", field.name));
                    }
                }
                (!reasons.is_empty()).then_some(Mismatch::Fields(reasons))
            }
            (Ty::Record { fields, .. }, Ty::Record { fields: wanted, .. }) => {
                let fits = wanted.iter().all(|(key, ty)| {
                    fields.iter().any(|(have, have_ty)| {
                        have == key && self.mismatch_depth(have_ty, ty, depth + 1).is_none()
                    })
                });
                (!fits).then_some(Mismatch::Plain)
            }
            _ => plain(),
        }
    }

    /// Whether two values can be compared with `==`/`!=`.
    pub fn comparable(&self, a: &Ty, b: &Ty) -> bool {
        if matches!(a, Ty::None) || matches!(b, Ty::None) {
            return true;
        }
        let (a, b) = (a.strip_optional(), b.strip_optional());
        if a.is_number() && b.is_number() {
            return true;
        }
        if let (Ty::Enum(x), Ty::Enum(y)) = (a, b) {
            return x.iter().any(|variant| y.contains(variant));
        }
        self.mismatch(a, b).is_none() || self.mismatch(b, a).is_none()
    }
}

/// Why a type does not fit.
#[derive(Clone, Debug, PartialEq)]
pub enum Mismatch {
    /// The types differ.
    Plain,
    /// A record literal does not fit a contract, for these reasons.
    Fields(Vec<String>),
}

/// The type a written type expression denotes. Unknown contract names become `any`
/// (they are reported by the name checks).
pub fn lower(ty: &TypeExpr, symbols: &Symbols<'_>) -> Ty {
    let base = match &ty.kind {
        TypeKind::String => Ty::String,
        TypeKind::Bool => Ty::Bool,
        TypeKind::Int(range) => Ty::Int(Bounds::from_range(range.as_ref())),
        TypeKind::Float(range) => Ty::Float(Bounds::from_range(range.as_ref())),
        TypeKind::List(element, range) => Ty::List(
            Box::new(lower(element, symbols)),
            Bounds::from_range(range.as_ref()),
        ),
        TypeKind::Enum(variants) => Ty::Enum(
            variants
                .iter()
                .map(|variant| variant.name.clone())
                .collect(),
        ),
        TypeKind::Named(name) => {
            if symbols.is_contract(&name.name) {
                Ty::Contract(name.name.clone())
            } else {
                Ty::Any
            }
        }
    };
    if ty.optional {
        Ty::optional(base)
    } else {
        base
    }
}
