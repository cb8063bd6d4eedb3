//! Resource limits of the live providers (DESIGN §15) against servers on loopback: an endless body is cut at the size limit while it is read, a body announced too large is refused, a body that trickles forever meets the request's total deadline, and a `Retry-After` of an hour is cut to the cap.

use std::sync::Arc;
use std::time::Duration;

use charter_runtime::engine::effects::Provider;
use charter_runtime::engine::provider::ProviderError;
use charter_runtime::world::limits::Limits;
use charter_runtime::world::providers::{
    AnthropicConfig, AnthropicProvider, ApiKey, OpenAiConfig, OpenAiProvider,
};
use charter_runtime::world::tools::ToolBox;
use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;
use wiremock::matchers::method;
use wiremock::{Mock, MockServer, ResponseTemplate};

use crate::support::{SECRET, request};

/// The most a test server sends before it gives up: far past every limit under test, and
/// a bound on the test's own memory and time should the limit not hold.
const SERVER_SENDS_AT_MOST: usize = 64 * 1024 * 1024;

/// How long a test waits for the provider before it calls the limit broken.
const TEST_PATIENCE: Duration = Duration::from_secs(60);

fn openai(base_url: String, limits: Limits) -> OpenAiProvider {
    let mut config = OpenAiConfig::new(format!("{base_url}/v1"), Some(ApiKey::new(SECRET)));
    config.limits = limits;
    OpenAiProvider::new(config, Arc::new(ToolBox::empty()))
        .unwrap_or_else(|error| panic!("{error}"))
}

fn anthropic(base_url: String, limits: Limits) -> AnthropicProvider {
    let mut config = AnthropicConfig::new(base_url, Some(ApiKey::new(SECRET)));
    config.limits = limits;
    AnthropicProvider::new(config, Arc::new(ToolBox::empty()))
        .unwrap_or_else(|error| panic!("{error}"))
}

/// A server on loopback that answers one request with a chunked 200 body that never ends
/// (one chunk of `chunk` bytes every `pause`), until the client hangs up or it has sent
/// [`SERVER_SENDS_AT_MOST`] bytes. Returns its base URL.
async fn endless_body_server(chunk: usize, pause: Duration) -> String {
    one_request_server(move |mut socket| async move {
        if socket.write_all(CHUNKED_HEAD.as_bytes()).await.is_err() {
            return;
        }
        let mut piece = format!("{chunk:x}\r\n").into_bytes();
        piece.extend(std::iter::repeat_n(b' ', chunk));
        piece.extend_from_slice(b"\r\n");
        let mut sent = 0;
        while sent < SERVER_SENDS_AT_MOST {
            if socket.write_all(&piece).await.is_err() {
                return;
            }
            sent += chunk;
            if !pause.is_zero() {
                tokio::time::sleep(pause).await;
            }
        }
    })
    .await
}

/// The status line and headers of a 200 whose body comes in chunks.
const CHUNKED_HEAD: &str =
    "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ntransfer-encoding: chunked\r\n\r\n";

/// A server on loopback that reads one request and leaves the connection to `answer`.
/// Returns its base URL.
async fn one_request_server<F, Answer>(answer: F) -> String
where
    F: FnOnce(tokio::net::TcpStream) -> Answer + Send + 'static,
    Answer: std::future::Future<Output = ()> + Send,
{
    let listener = TcpListener::bind("127.0.0.1:0")
        .await
        .unwrap_or_else(|error| panic!("{error}"));
    let address = listener
        .local_addr()
        .unwrap_or_else(|error| panic!("{error}"));
    tokio::spawn(async move {
        let Ok((mut socket, _)) = listener.accept().await else {
            return;
        };
        let mut request = vec![0u8; 64 * 1024];
        let _ = socket.read(&mut request).await;
        answer(socket).await;
    });
    format!("http://{address}")
}

fn assert_too_large(
    result: Result<
        Result<charter_runtime::engine::provider::ModelResponse, ProviderError>,
        tokio::time::error::Elapsed,
    >,
) {
    let error = match result {
        Err(_) => panic!("the body was still being read after {TEST_PATIENCE:?}"),
        Ok(Ok(_)) => panic!("an endless body gave an answer"),
        Ok(Err(error)) => error,
    };
    assert!(
        matches!(&error, ProviderError::Permanent { message, .. } if message.contains("larger than the limit of 1 MB")),
        "{error:?}"
    );
}

#[tokio::test]
async fn an_endless_body_is_cut_at_the_limit_while_it_is_read() {
    let limits = Limits {
        max_body_bytes: 1024 * 1024,
        ..Limits::default()
    };
    let server = endless_body_server(64 * 1024, Duration::ZERO).await;
    let provider = openai(server, limits);
    assert_too_large(
        tokio::time::timeout(TEST_PATIENCE, provider.complete(request("openai:m"))).await,
    );
    let server = endless_body_server(64 * 1024, Duration::ZERO).await;
    let provider = anthropic(server, limits);
    assert_too_large(
        tokio::time::timeout(TEST_PATIENCE, provider.complete(request("anthropic:m"))).await,
    );
}

#[tokio::test]
async fn a_body_announced_over_the_limit_is_refused() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(ResponseTemplate::new(200).set_body_string(" ".repeat(2 * 1024 * 1024)))
        .mount(&server)
        .await;
    let limits = Limits {
        max_body_bytes: 1024 * 1024,
        ..Limits::default()
    };
    let provider = openai(server.uri(), limits);
    assert_too_large(
        tokio::time::timeout(TEST_PATIENCE, provider.complete(request("openai:m"))).await,
    );
}

#[tokio::test]
async fn a_body_that_trickles_forever_meets_the_request_deadline() {
    // One byte every 10 ms would take a year to reach the size limit; the deadline ends it.
    let server = endless_body_server(1, Duration::from_millis(10)).await;
    let limits = Limits {
        request_timeout: Duration::from_millis(300),
        ..Limits::default()
    };
    let provider = openai(server, limits);
    let result = tokio::time::timeout(TEST_PATIENCE, provider.complete(request("openai:m"))).await;
    let error = match result {
        Err(_) => panic!("the request had no deadline"),
        Ok(Ok(_)) => panic!("an endless body gave an answer"),
        Ok(Err(error)) => error,
    };
    assert!(error.is_transient(), "{error:?}");
    assert!(error.to_string().contains("timed out"), "{error}");
}

#[tokio::test]
async fn a_retry_after_of_an_hour_is_cut_to_the_cap() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(
            ResponseTemplate::new(429)
                .insert_header("retry-after", "3600")
                .set_body_json(json!({"error": {"message": "slow down"}})),
        )
        .mount(&server)
        .await;
    let provider = openai(server.uri(), Limits::default());
    let error = provider.complete(request("openai:m")).await.err();
    assert_eq!(
        error.and_then(|error| error.retry_after()),
        Some(Duration::from_secs(60))
    );
}

/// A server on loopback that takes one request and then says nothing — not even its
/// status line, or only its head when `send_head` — holding the connection open for the
/// test's patience. Returns its base URL.
async fn silent_server(send_head: bool) -> String {
    one_request_server(move |mut socket| async move {
        if send_head {
            let _ = socket.write_all(CHUNKED_HEAD.as_bytes()).await;
        }
        tokio::time::sleep(TEST_PATIENCE).await;
        drop(socket);
    })
    .await
}

/// DESIGN §15: a role with no `timeout` is still bounded on a silent connection. No byte
/// for the model entry's `idle_timeout` (or the limits' default, 120 s) is a timeout, a
/// transient error a retry may help — before the status line and in the middle of a body.
#[tokio::test]
async fn a_silent_server_is_a_timeout_after_the_idle_timeout() {
    let idle = Duration::from_millis(200);
    for send_head in [false, true] {
        // The default, set short; and a model entry's own `idle_timeout` under the long default.
        for from_entry in [false, true] {
            let mut limits = Limits::default();
            let mut calls = [request("openai:m"), request("anthropic:m")];
            if from_entry {
                for call in &mut calls {
                    let mut settings = (*call.settings).clone();
                    settings.params.idle_timeout_ms = Some(200);
                    call.settings = Arc::new(settings);
                }
            } else {
                limits.idle_timeout = idle;
            }
            let providers: [Box<dyn Provider>; 2] = [
                Box::new(openai(silent_server(send_head).await, limits)),
                Box::new(anthropic(silent_server(send_head).await, limits)),
            ];
            for (provider, call) in providers.into_iter().zip(calls.clone()) {
                let started = std::time::Instant::now();
                let result = tokio::time::timeout(TEST_PATIENCE, provider.complete(call))
                    .await
                    .unwrap_or_else(|_| panic!("no timeout on a silent server (head {send_head})"));
                assert_eq!(
                    result.err(),
                    Some(ProviderError::TimedOut { after: idle }),
                    "head {send_head}, from the entry {from_entry}"
                );
                assert!(started.elapsed() < Duration::from_secs(10));
            }
        }
    }
}
