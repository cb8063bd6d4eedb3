//! Who may talk to `charter serve` (DESIGN §13.3): a request's `Host` must name the server, an `Origin` must be the server's own, and a `POST` must say `Content-Type: application/json`.
//!
//! A server on 127.0.0.1 is reachable by every web page its user opens. Without these
//! checks a page on any site could start runs on the user's API keys with a form-like
//! `fetch` (a `text/plain` body needs no CORS preflight), and a site whose DNS name is
//! rebound to 127.0.0.1 could read every run, answer its asks and cancel it. The checks
//! are those of Jupyter's and Ollama's fixes: the `Host` header must name the address the
//! server listens on (loopback names for a loopback server, an IP address for one on every
//! interface) or a name given with `--allow-host`; any `Origin` but the server's own is
//! refused on every route; and a state-changing `POST` takes only JSON, which a browser
//! sends cross-site only after a preflight this server never grants. (`DELETE` is not a
//! method a page can send cross-site without one either.)

use std::net::IpAddr;

use axum::extract::{Request, State};
use axum::http::{Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::Response;

/// The names a request's `Host` may give.
#[derive(Clone, Debug)]
pub struct HostPolicy {
    /// The address the server was told to listen on (`--host`).
    bound: String,
    /// Names given with `--allow-host`, lower-cased.
    allowed: Vec<String>,
}

impl HostPolicy {
    pub fn new(bound: &str, allowed: &[String]) -> Self {
        HostPolicy {
            bound: bare(bound).to_ascii_lowercase(),
            allowed: allowed
                .iter()
                .map(|name| bare(name).to_ascii_lowercase())
                .collect(),
        }
    }

    /// Whether a `Host` header's name (its port aside) names this server.
    fn admits(&self, host: &str) -> bool {
        let name = host_name(host).to_ascii_lowercase();
        if name == self.bound || self.allowed.contains(&name) {
            return true;
        }
        let bound_ip = self.bound.parse::<IpAddr>().ok();
        match bound_ip {
            // A loopback server answers to every loopback name.
            _ if is_loopback_name(&self.bound) => is_loopback_name(&name),
            // A server on every interface answers to any address, which no DNS name can
            // rebind, and to loopback names; a DNS name needs --allow-host.
            Some(ip) if ip.is_unspecified() => {
                name.parse::<IpAddr>().is_ok() || is_loopback_name(&name)
            }
            Some(ip) => name.parse::<IpAddr>().is_ok_and(|given| given == ip),
            None => false,
        }
    }
}

/// Why a request is refused, or `None` to let it through.
pub fn refusal(
    policy: &HostPolicy,
    method: &Method,
    host: Option<&str>,
    origin: Option<&str>,
    content_type: Option<&str>,
) -> Option<(StatusCode, String)> {
    if let Some(host) = host
        && !policy.admits(host)
    {
        let name = charter_runtime::world::escape::one_line(host_name(host), 100);
        return Some((
            StatusCode::FORBIDDEN,
            format!(
                "Host `{name}` is not this server's address (a page whose name points at this machine is refused); start it with --allow-host {name} to let clients use that name"
            ),
        ));
    }
    if let Some(origin) = origin {
        let own = host.is_some_and(|host| origin.eq_ignore_ascii_case(&format!("http://{host}")));
        if !own {
            return Some((
                StatusCode::FORBIDDEN,
                format!(
                    "requests from another site are refused (Origin `{}`): only the page this server serves may use it",
                    charter_runtime::world::escape::one_line(origin, 100)
                ),
            ));
        }
    }
    if method == Method::POST && !content_type.is_some_and(is_json) {
        return Some((
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "a POST must send `Content-Type: application/json`".to_string(),
        ));
    }
    None
}

/// The middleware: refuses what [`refusal`] refuses, before the token is even looked at.
pub async fn guard(State(policy): State<HostPolicy>, request: Request, next: Next) -> Response {
    let refused = {
        let headers = request.headers();
        let text = |name: header::HeaderName| {
            headers
                .get(name)
                .map(|value| value.to_str().unwrap_or("\u{fffd}"))
        };
        refusal(
            &policy,
            request.method(),
            text(header::HOST),
            text(header::ORIGIN),
            text(header::CONTENT_TYPE),
        )
    };
    match refused {
        Some((status, message)) => super::error(status, &message),
        None => next.run(request).await,
    }
}

/// `application/json`, whatever its parameters (`; charset=utf-8`).
fn is_json(content_type: &str) -> bool {
    content_type
        .split(';')
        .next()
        .is_some_and(|media| media.trim().eq_ignore_ascii_case("application/json"))
}

/// A `Host` header's name without its port: `[::1]:8080` is `::1`, `a.b:80` is `a.b`.
fn host_name(host: &str) -> &str {
    let host = host.trim();
    if let Some(rest) = host.strip_prefix('[') {
        return rest.split(']').next().unwrap_or(rest);
    }
    // An IPv6 address has more than one `:`; only a bracketed one can carry a port.
    match host.rsplit_once(':') {
        Some((name, port))
            if !name.contains(':') && port.bytes().all(|byte| byte.is_ascii_digit()) =>
        {
            name
        }
        _ => host,
    }
}

/// An address as `--host` takes it, without IPv6 brackets.
fn bare(address: &str) -> &str {
    address.trim().trim_start_matches('[').trim_end_matches(']')
}

/// `localhost` (and its subdomains, which resolve to loopback), `127.0.0.0/8`, `::1`.
fn is_loopback_name(name: &str) -> bool {
    name == "localhost"
        || name.ends_with(".localhost")
        || name.parse::<IpAddr>().is_ok_and(|ip| ip.is_loopback())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(bound: &str, allowed: &[&str], method: Method, headers: [Option<&str>; 3]) -> u16 {
        let allowed: Vec<String> = allowed.iter().map(|name| name.to_string()).collect();
        let policy = HostPolicy::new(bound, &allowed);
        refusal(&policy, &method, headers[0], headers[1], headers[2])
            .map_or(200, |(status, _)| status.as_u16())
    }

    #[test]
    fn a_loopback_server_answers_to_loopback_names_only() {
        for host in [
            "127.0.0.1:8080",
            "localhost:8080",
            "[::1]:8080",
            "127.0.0.2",
            "LOCALHOST",
        ] {
            assert_eq!(
                check("127.0.0.1", &[], Method::GET, [Some(host), None, None]),
                200,
                "{host}"
            );
        }
        for host in [
            "evil.example:8080",
            "evil.example",
            "10.0.0.1:8080",
            "127.0.0.1.evil.example",
        ] {
            assert_eq!(
                check("127.0.0.1", &[], Method::GET, [Some(host), None, None]),
                403,
                "{host}"
            );
        }
        assert_eq!(
            check(
                "127.0.0.1",
                &["dev.internal"],
                Method::GET,
                [Some("dev.internal:8080"), None, None]
            ),
            200
        );
    }

    #[test]
    fn a_server_on_every_interface_answers_to_addresses_and_allowed_names() {
        assert_eq!(
            check(
                "0.0.0.0",
                &[],
                Method::GET,
                [Some("192.0.2.7:8080"), None, None]
            ),
            200
        );
        assert_eq!(
            check(
                "0.0.0.0",
                &[],
                Method::GET,
                [Some("box.example:8080"), None, None]
            ),
            403
        );
        assert_eq!(
            check(
                "0.0.0.0",
                &["box.example"],
                Method::GET,
                [Some("box.example:8080"), None, None]
            ),
            200
        );
        assert_eq!(
            check(
                "192.0.2.7",
                &[],
                Method::GET,
                [Some("192.0.2.8"), None, None]
            ),
            403
        );
    }

    #[test]
    fn another_sites_origin_is_refused_on_every_method() {
        let host = Some("127.0.0.1:8080");
        let json = Some("application/json");
        for method in [Method::GET, Method::POST, Method::DELETE] {
            assert_eq!(
                check(
                    "127.0.0.1",
                    &[],
                    method.clone(),
                    [host, Some("http://evil.example"), json]
                ),
                403
            );
            assert_eq!(
                check("127.0.0.1", &[], method.clone(), [host, Some("null"), json]),
                403
            );
            assert_eq!(
                check(
                    "127.0.0.1",
                    &[],
                    method,
                    [host, Some("http://127.0.0.1:8080"), json]
                ),
                200
            );
        }
        assert_eq!(
            check(
                "127.0.0.1",
                &[],
                Method::GET,
                [host, Some("http://localhost:8080"), None]
            ),
            403
        );
    }

    #[test]
    fn a_post_takes_only_json() {
        let host = Some("127.0.0.1:8080");
        for content_type in [
            None,
            Some("text/plain"),
            Some("application/x-www-form-urlencoded"),
            Some("multipart/form-data; boundary=x"),
        ] {
            assert_eq!(
                check("127.0.0.1", &[], Method::POST, [host, None, content_type]),
                415,
                "{content_type:?}"
            );
        }
        assert_eq!(
            check(
                "127.0.0.1",
                &[],
                Method::POST,
                [host, None, Some("Application/JSON; charset=utf-8")]
            ),
            200
        );
        assert_eq!(
            check("127.0.0.1", &[], Method::DELETE, [host, None, None]),
            200
        );
    }

    #[test]
    fn host_names_lose_their_port() {
        assert_eq!(host_name("[::1]:8080"), "::1");
        assert_eq!(host_name("a.b:80"), "a.b");
        assert_eq!(host_name("a.b"), "a.b");
        assert_eq!(host_name("::1"), "::1");
    }
}
