//! The web dashboard at `/`: one page and its script and style, embedded in the binary (no
//! CDN, works offline), over the JSON API.
//!
//! # Login and CSRF
//! The page asks for a bearer token (the one the CLI uses), keeps it in the tab's
//! `sessionStorage` and sends it as `Authorization: Bearer …` on every API call, exactly as
//! the CLI does. No cookie is ever set, so the browser never attaches a credential on its own
//! and a cross-site request cannot act as the user: there is nothing for CSRF to ride on, and
//! the API needs no second authentication path. The price is that a script running in the
//! page could read the token, so the page allows only its own script (a strict
//! `Content-Security-Policy`, no inline script), builds every element with `textContent`
//! (never `innerHTML` of data), and may not be framed. Closing the tab forgets the token.
//!
//! # Layout
//! - this file: the routes and the embedded assets with their headers.
//! - `grid`: `GET /api/v1/grid`, the grid at a glance (what the Grid page shows), which the
//!   other endpoints do not give in one answer.
//! - `assets/`: `index.html`, `app.js` (a small app with no build step: plain ES2020, hash
//!   routes, SVG drawn in the page), `app.css`.

pub(crate) mod grid;

use crate::runtime::Service;
use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, MethodRouter};
use std::sync::Arc;

/// The page's only sources are its own origin; nothing inline, no frames.
const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; \
    img-src 'self' data:; connect-src 'self'; form-action 'none'; base-uri 'none'; \
    frame-ancestors 'none'";

/// One embedded file.
struct Asset {
    path: &'static str,
    content_type: &'static str,
    body: &'static str,
}

const ASSETS: &[Asset] = &[
    Asset {
        path: "/",
        content_type: "text/html; charset=utf-8",
        body: include_str!("assets/index.html"),
    },
    Asset {
        path: "/assets/app.js",
        content_type: "text/javascript; charset=utf-8",
        body: include_str!("assets/app.js"),
    },
    Asset {
        path: "/assets/app.css",
        content_type: "text/css; charset=utf-8",
        body: include_str!("assets/app.css"),
    },
];

/// The dashboard's routes, added to the service's router: `/api/v1/grid` and the page's
/// files.
pub fn routes() -> Vec<(&'static str, MethodRouter<Arc<Service>>)> {
    let mut r: Vec<(&'static str, MethodRouter<Arc<Service>>)> =
        vec![("/api/v1/grid", get(grid::show_grid))];
    for a in ASSETS {
        r.push((a.path, get(move || async move { serve(a) })));
    }
    r
}

/// The paths of the page and its files (not API, so not in the OpenAPI document).
pub fn page_paths() -> Vec<&'static str> {
    ASSETS.iter().map(|a| a.path).collect()
}

fn serve(a: &'static Asset) -> Response {
    let mut resp = (StatusCode::OK, a.body).into_response();
    let h = resp.headers_mut();
    h.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static(a.content_type),
    );
    h.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(CSP),
    );
    h.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    h.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    h.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("no-referrer"),
    );
    // A new binary brings new assets: revalidate every time (they are small).
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    resp
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The page loads only its own script and style, with no inline script for the policy
    /// to forbid, and the script writes no HTML from data.
    #[test]
    fn the_page_keeps_to_its_policy() {
        let html = ASSETS[0].body;
        assert!(html.contains(r#"<script src="/assets/app.js""#), "{html}");
        assert!(html.contains(r#"href="/assets/app.css""#), "{html}");
        assert_eq!(html.matches("<script").count(), 1, "one script, external");
        assert!(
            !html.contains("http://") && !html.contains("https://"),
            "no CDN"
        );
        for a in ASSETS {
            assert!(!a.body.contains("innerHTML"), "{} writes HTML", a.path);
            assert!(!a.body.contains("eval("), "{} evaluates text", a.path);
            assert!(
                !a.body.contains("document.cookie"),
                "{} uses cookies",
                a.path
            );
        }
    }
}
