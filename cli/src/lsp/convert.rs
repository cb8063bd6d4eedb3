//! Conversions between the language service's values (paths, byte offsets) and the
//! protocol's (URIs, lines and UTF-16 columns).

use charter_ide::{
    Analysis, Completion, CompletionKind, EditorDiagnostic, FileRange, LineIndex, OutlineItem,
    SymbolKind, Token, TokenKind,
};
use lsp_types::{
    CompletionItem, CompletionItemKind, Diagnostic, DiagnosticRelatedInformation,
    DiagnosticSeverity, DocumentSymbol, Location, NumberOrString, Position, Range, SemanticToken,
    SemanticTokenType, Url,
};

/// The path of a `file:` URI, normalized as the language service names files.
pub fn path_of(uri: &Url) -> Option<String> {
    let path = uri.to_file_path().ok()?;
    Some(charter_ide::normalize(&crate::loader::display_path(&path)))
}

pub fn uri_of(path: &str) -> Option<Url> {
    Url::from_file_path(path).ok()
}

pub fn position(index: &LineIndex, offset: usize) -> Position {
    let (line, character) = index.position(offset);
    Position { line, character }
}

pub fn range(index: &LineIndex, range: std::ops::Range<usize>) -> Range {
    Range {
        start: position(index, range.start),
        end: position(index, range.end),
    }
}

pub fn offset(index: &LineIndex, position: Position) -> usize {
    index.offset(position.line, position.character)
}

/// A place in a file the analysis read, as a protocol location.
pub fn location(analysis: &Analysis, place: &FileRange) -> Option<Location> {
    let index = LineIndex::new(analysis.text(&place.path).unwrap_or(""));
    Some(Location {
        uri: uri_of(&place.path)?,
        range: range(&index, place.range.clone()),
    })
}

pub fn diagnostic(analysis: &Analysis, index: &LineIndex, found: &EditorDiagnostic) -> Diagnostic {
    let related: Vec<DiagnosticRelatedInformation> = found
        .related
        .iter()
        .filter_map(|(place, message)| {
            Some(DiagnosticRelatedInformation {
                location: location(analysis, place)?,
                message: if message.is_empty() {
                    "see here".to_string()
                } else {
                    message.clone()
                },
            })
        })
        .collect();
    Diagnostic {
        range: range(index, found.range.clone()),
        severity: Some(if found.error {
            DiagnosticSeverity::ERROR
        } else {
            DiagnosticSeverity::WARNING
        }),
        code: Some(NumberOrString::String(found.code.clone())),
        source: Some("charter".to_string()),
        message: found.message.clone(),
        related_information: (!related.is_empty()).then_some(related),
        ..Diagnostic::default()
    }
}

pub fn completion(found: &Completion) -> CompletionItem {
    let kind = match found.kind {
        CompletionKind::Keyword => CompletionItemKind::KEYWORD,
        CompletionKind::Contract => CompletionItemKind::STRUCT,
        CompletionKind::Field => CompletionItemKind::FIELD,
        CompletionKind::Role => CompletionItemKind::FUNCTION,
        CompletionKind::Step => CompletionItemKind::VARIABLE,
        CompletionKind::Gate => CompletionItemKind::CLASS,
        CompletionKind::Rules => CompletionItemKind::MODULE,
        CompletionKind::Tool => CompletionItemKind::METHOD,
        CompletionKind::Server => CompletionItemKind::MODULE,
        CompletionKind::Model => CompletionItemKind::CONSTANT,
        CompletionKind::Issue => CompletionItemKind::ENUM_MEMBER,
        CompletionKind::Variable => CompletionItemKind::VARIABLE,
    };
    CompletionItem {
        label: found.label.clone(),
        kind: Some(kind),
        detail: found.detail.clone(),
        ..CompletionItem::default()
    }
}

#[allow(deprecated)] // `DocumentSymbol::deprecated` must still be written.
pub fn symbol(index: &LineIndex, item: &OutlineItem) -> DocumentSymbol {
    use lsp_types::SymbolKind as Kind;
    let kind = match item.kind {
        SymbolKind::Import => Kind::FILE,
        SymbolKind::Models | SymbolKind::Rules | SymbolKind::Repair | SymbolKind::Budget => {
            Kind::NAMESPACE
        }
        SymbolKind::Model => Kind::CONSTANT,
        SymbolKind::Contract | SymbolKind::Session => Kind::STRUCT,
        SymbolKind::Field => Kind::FIELD,
        SymbolKind::Tool => Kind::METHOD,
        SymbolKind::Mcp => Kind::MODULE,
        SymbolKind::Role => Kind::FUNCTION,
        SymbolKind::Gate => Kind::CLASS,
        SymbolKind::GateRule => Kind::PROPERTY,
        SymbolKind::Invariant => Kind::INTERFACE,
        SymbolKind::Remember => Kind::VARIABLE,
        SymbolKind::Flow => Kind::MODULE,
        SymbolKind::Step => Kind::VARIABLE,
    };
    DocumentSymbol {
        name: item.name.clone(),
        detail: None,
        kind,
        tags: None,
        deprecated: None,
        range: range(index, item.range.clone()),
        selection_range: range(index, item.selection.clone()),
        children: (!item.children.is_empty()).then(|| {
            item.children
                .iter()
                .map(|child| symbol(index, child))
                .collect()
        }),
    }
}

/// The token types, in the order of [`token_type`]'s numbers.
pub fn token_legend() -> Vec<SemanticTokenType> {
    vec![
        SemanticTokenType::KEYWORD,
        SemanticTokenType::TYPE,
        SemanticTokenType::FUNCTION,
        SemanticTokenType::VARIABLE,
        SemanticTokenType::PROPERTY,
        SemanticTokenType::STRING,
        SemanticTokenType::NUMBER,
        SemanticTokenType::COMMENT,
        SemanticTokenType::ENUM_MEMBER,
        SemanticTokenType::CLASS,
        SemanticTokenType::METHOD,
        SemanticTokenType::MACRO,
        SemanticTokenType::NAMESPACE,
        SemanticTokenType::PARAMETER,
    ]
}

fn token_type(kind: TokenKind) -> u32 {
    match kind {
        TokenKind::Keyword => 0,
        TokenKind::Type => 1,
        TokenKind::Function => 2,
        TokenKind::Variable => 3,
        TokenKind::Property => 4,
        TokenKind::String => 5,
        TokenKind::Number => 6,
        TokenKind::Comment => 7,
        TokenKind::EnumMember => 8,
        TokenKind::Class => 9,
        TokenKind::Method => 10,
        TokenKind::Macro => 11,
        TokenKind::Namespace => 12,
        TokenKind::Parameter => 13,
    }
}

/// Tokens in the protocol's relative encoding; a token over several lines (a `"""`
/// block, a `/* */` comment) is split into one per line.
pub fn tokens(text: &str, index: &LineIndex, tokens: &[Token]) -> Vec<SemanticToken> {
    let mut encoded = Vec::new();
    let (mut previous_line, mut previous_start) = (0u32, 0u32);
    for token in tokens {
        let mut start = token.range.start;
        while start < token.range.end {
            let line_end = text
                .get(start..token.range.end)
                .and_then(|rest| rest.find('\n'))
                .map_or(token.range.end, |at| start + at);
            let (line, column) = index.position(start);
            let (_, end_column) = index.position(line_end);
            if end_column > column {
                let delta_line = line - previous_line;
                let delta_start = if delta_line == 0 {
                    column - previous_start
                } else {
                    column
                };
                encoded.push(SemanticToken {
                    delta_line,
                    delta_start,
                    length: end_column - column,
                    token_type: token_type(token.kind),
                    token_modifiers_bitset: 0,
                });
                (previous_line, previous_start) = (line, column);
            }
            start = line_end + 1;
        }
    }
    encoded
}
