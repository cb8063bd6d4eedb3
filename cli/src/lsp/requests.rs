//! The requests `charter lsp` answers, each read from the analysis of the spec that holds
//! the file asked about.

use std::collections::HashMap;

use charter_ide::{Analysis, LineIndex};
use lsp_server::{ErrorCode, Request, Response};
use lsp_types::request::{self, Request as _};
use lsp_types::{
    CompletionParams, CompletionResponse, DocumentFormattingParams, DocumentSymbolParams,
    DocumentSymbolResponse, GotoDefinitionParams, GotoDefinitionResponse, Hover, HoverContents,
    HoverParams, MarkupContent, MarkupKind, PrepareRenameResponse, ReferenceParams, RenameParams,
    SemanticTokens, SemanticTokensParams, SemanticTokensResult, TextDocumentPositionParams,
    TextEdit, Url, WorkspaceEdit,
};
use serde::Serialize;
use serde::de::DeserializeOwned;

use super::{Server, convert};

pub fn handle(server: &Server<'_>, request: Request) -> Response {
    let id = request.id.clone();
    let answer = match request.method.as_str() {
        request::HoverRequest::METHOD => answer(request, |p: HoverParams| {
            hover(server, &p.text_document_position_params)
        }),
        request::GotoDefinition::METHOD => answer(request, |p: GotoDefinitionParams| {
            definition(server, &p.text_document_position_params)
        }),
        request::References::METHOD => answer(request, |p: ReferenceParams| references(server, &p)),
        request::PrepareRenameRequest::METHOD => {
            answer(request, |p: TextDocumentPositionParams| {
                prepare_rename(server, &p)
            })
        }
        request::Rename::METHOD => answer(request, |p: RenameParams| rename(server, &p)),
        request::Completion::METHOD => {
            answer(request, |p: CompletionParams| completion(server, &p))
        }
        request::DocumentSymbolRequest::METHOD => answer(request, |p: DocumentSymbolParams| {
            symbols(server, &p.text_document.uri)
        }),
        request::SemanticTokensFullRequest::METHOD => answer(request, |p: SemanticTokensParams| {
            tokens(server, &p.text_document.uri)
        }),
        request::Formatting::METHOD => answer(request, |p: DocumentFormattingParams| {
            formatting(server, &p.text_document.uri)
        }),
        method => Err((
            ErrorCode::MethodNotFound,
            format!("`charter lsp` does not answer `{method}`"),
        )),
    };
    match answer {
        Ok(value) => Response::new_ok(id, value),
        Err((code, message)) => Response::new_err(id, code as i32, message),
    }
}

type Answer = Result<serde_json::Value, (ErrorCode, String)>;

/// Decodes the parameters, runs `f`, and encodes what it returns (`null` for `None`).
fn answer<P, R>(request: Request, f: impl FnOnce(P) -> Result<Option<R>, String>) -> Answer
where
    P: DeserializeOwned,
    R: Serialize,
{
    let params: P = serde_json::from_value(request.params).map_err(|error| {
        (
            ErrorCode::InvalidParams,
            format!("bad parameters for `{}`: {error}", request.method),
        )
    })?;
    let result = f(params).map_err(|message| (ErrorCode::RequestFailed, message))?;
    serde_json::to_value(result).map_err(|error| (ErrorCode::InternalError, error.to_string()))
}

/// The analysis holding the document, its path, and the byte offset of the position.
fn locate<'s>(
    server: &'s Server<'_>,
    at: &TextDocumentPositionParams,
) -> Option<(&'s Analysis, String, usize)> {
    let path = convert::path_of(&at.text_document.uri)?;
    let analysis = server.analysis_for(&path)?;
    let index = LineIndex::new(analysis.text(&path)?);
    let offset = convert::offset(&index, at.position);
    Some((analysis, path, offset))
}

fn hover(server: &Server<'_>, at: &TextDocumentPositionParams) -> Result<Option<Hover>, String> {
    let Some((analysis, path, offset)) = locate(server, at) else {
        return Ok(None);
    };
    let Some(found) = analysis.hover(&path, offset) else {
        return Ok(None);
    };
    let index = LineIndex::new(analysis.text(&path).unwrap_or(""));
    Ok(Some(Hover {
        contents: HoverContents::Markup(MarkupContent {
            kind: MarkupKind::Markdown,
            value: found.markdown,
        }),
        range: Some(convert::range(&index, found.range)),
    }))
}

fn definition(
    server: &Server<'_>,
    at: &TextDocumentPositionParams,
) -> Result<Option<GotoDefinitionResponse>, String> {
    let Some((analysis, path, offset)) = locate(server, at) else {
        return Ok(None);
    };
    let places: Vec<_> = analysis
        .definition(&path, offset)
        .iter()
        .filter_map(|place| convert::location(analysis, place))
        .collect();
    Ok((!places.is_empty()).then_some(GotoDefinitionResponse::Array(places)))
}

fn references(
    server: &Server<'_>,
    params: &ReferenceParams,
) -> Result<Option<Vec<lsp_types::Location>>, String> {
    let Some((analysis, path, offset)) = locate(server, &params.text_document_position) else {
        return Ok(None);
    };
    let include = params.context.include_declaration;
    Ok(Some(
        analysis
            .references(&path, offset, include)
            .iter()
            .filter_map(|place| convert::location(analysis, place))
            .collect(),
    ))
}

fn prepare_rename(
    server: &Server<'_>,
    at: &TextDocumentPositionParams,
) -> Result<Option<PrepareRenameResponse>, String> {
    let (analysis, path, offset) =
        locate(server, at).ok_or("this file is not part of an open spec")?;
    let (place, name) = analysis.prepare_rename(&path, offset)?;
    let index = LineIndex::new(analysis.text(&path).unwrap_or(""));
    Ok(Some(PrepareRenameResponse::RangeWithPlaceholder {
        range: convert::range(&index, place.range),
        placeholder: name,
    }))
}

fn rename(server: &Server<'_>, params: &RenameParams) -> Result<Option<WorkspaceEdit>, String> {
    let (analysis, path, offset) = locate(server, &params.text_document_position)
        .ok_or("this file is not part of an open spec")?;
    let edits = analysis.rename(&path, offset, &params.new_name)?;
    let mut changes: HashMap<Url, Vec<TextEdit>> = HashMap::new();
    for edit in edits {
        let index = LineIndex::new(analysis.text(&edit.path).unwrap_or(""));
        let uri = convert::uri_of(&edit.path).ok_or("a file path is not a URI")?;
        changes.entry(uri).or_default().push(TextEdit {
            range: convert::range(&index, edit.range),
            new_text: edit.new_text,
        });
    }
    Ok(Some(WorkspaceEdit {
        changes: Some(changes),
        ..WorkspaceEdit::default()
    }))
}

fn completion(
    server: &Server<'_>,
    params: &CompletionParams,
) -> Result<Option<CompletionResponse>, String> {
    let Some((analysis, path, offset)) = locate(server, &params.text_document_position) else {
        return Ok(None);
    };
    let items = analysis
        .completions(&path, offset)
        .iter()
        .map(convert::completion)
        .collect();
    Ok(Some(CompletionResponse::Array(items)))
}

fn symbols(server: &Server<'_>, uri: &Url) -> Result<Option<DocumentSymbolResponse>, String> {
    let Some(path) = convert::path_of(uri) else {
        return Ok(None);
    };
    let Some(analysis) = server.analyses.get(&path) else {
        return Ok(Some(DocumentSymbolResponse::Nested(Vec::new())));
    };
    let index = LineIndex::new(analysis.text(&path).unwrap_or(""));
    Ok(Some(DocumentSymbolResponse::Nested(
        analysis
            .outline()
            .iter()
            .map(|item| convert::symbol(&index, item))
            .collect(),
    )))
}

fn tokens(server: &Server<'_>, uri: &Url) -> Result<Option<SemanticTokensResult>, String> {
    let Some(path) = convert::path_of(uri) else {
        return Ok(None);
    };
    let Some(analysis) = server.analysis_for(&path) else {
        return Ok(None);
    };
    let text = analysis.text(&path).unwrap_or("");
    let index = LineIndex::new(text);
    let data = convert::tokens(text, &index, &analysis.tokens(&path));
    Ok(Some(SemanticTokensResult::Tokens(SemanticTokens {
        result_id: None,
        data,
    })))
}

/// The whole document in `charter fmt`'s layout, as one edit (none when it already is);
/// only `.charter` files are formatted. The text is the editor's, open or not yet saved.
fn formatting(server: &Server<'_>, uri: &Url) -> Result<Option<Vec<TextEdit>>, String> {
    let Some(path) = convert::path_of(uri).filter(|path| path.ends_with(".charter")) else {
        return Ok(None);
    };
    let Some(text) = server.documents.get(&path) else {
        return Err("format a document the editor has open".to_string());
    };
    let index = LineIndex::new(text);
    Ok(Some(
        charter_ide::format(&path, text)?
            .map(|edit| TextEdit {
                range: convert::range(&index, edit.range),
                new_text: edit.new_text,
            })
            .into_iter()
            .collect(),
    ))
}
