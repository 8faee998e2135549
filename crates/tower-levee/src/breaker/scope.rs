//! Which breaker, gate and park a request belongs to: [`Scope`],
//! [`ScopeKeys`], [`default_scope`].

use std::borrow::Cow;
use std::sync::Arc;

use crate::inline_str::InlineStr;

/// Scope names set by the caller in the request's extensions. Every field is
/// optional; an unset one falls back to the default derived from the URI.
///
/// Three mechanisms, three scopes, since providers count quotas per account
/// and model while outages hit an account, an endpoint or a region:
///
/// - the **failure domain** keys the breaker: an account, deployment or
///   region endpoint (default: the URI's authority);
/// - the **quota scope** keys the throttle gate: the failure domain × the
///   model, since providers rate-limit per model (Azure: per deployment);
/// - the **billing scope** keys the park table: whatever a spend cap applies
///   to, usually the whole account or project (default: the failure domain).
///
/// A caller that knows better sets a [`Scope`] in the request's extensions,
/// or gives the layer its own [`ScopeFn`]. However they are named, the
/// three keys are built from the names by one rule: the failure domain is
/// the domain (with `isolate_by_model`, `domain/model`), the quota scope
/// `domain/model` (the domain when no model is named), the billing scope the
/// one named, else the domain.
///
/// ```
/// use tower_levee::breaker::Scope;
/// let mut req = http::Request::new(());
/// req.extensions_mut().insert(Scope::new().domain("org-a").model("gpt-4o"));
/// ```
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Scope {
    domain: Option<Cow<'static, str>>,
    model: Option<Cow<'static, str>>,
    billing: Option<Cow<'static, str>>,
}

impl Scope {
    /// An empty scope: every name falls back to its default.
    pub fn new() -> Self {
        Self::default()
    }

    /// Sets the failure domain (the breaker's key), e.g. an account name.
    pub fn domain(mut self, domain: impl Into<Cow<'static, str>>) -> Self {
        self.domain = Some(domain.into());
        self
    }

    /// Sets the model (or Azure deployment): the quota scope is domain × model.
    pub fn model(mut self, model: impl Into<Cow<'static, str>>) -> Self {
        self.model = Some(model.into());
        self
    }

    /// Sets the billing scope (the park table's key), e.g. a project.
    pub fn billing(mut self, billing: impl Into<Cow<'static, str>>) -> Self {
        self.billing = Some(billing.into());
        self
    }
}

/// The request's head, as a [`ScopeFn`] sees it.
#[derive(Clone, Copy, Debug)]
#[non_exhaustive]
pub struct RequestHead<'a> {
    /// The request method.
    pub method: &'a http::Method,
    /// The request URI.
    pub uri: &'a http::Uri,
    /// The request headers.
    pub headers: &'a http::HeaderMap,
    /// The request extensions.
    pub extensions: &'a http::Extensions,
}

impl<'a> RequestHead<'a> {
    /// The head of `req`.
    pub fn of<B>(req: &'a http::Request<B>) -> Self {
        RequestHead {
            method: req.method(),
            uri: req.uri(),
            headers: req.headers(),
            extensions: req.extensions(),
        }
    }
}

/// The scope names of one request, borrowed from it.
///
/// A [`ScopeFn`] builds them:
///
/// ```
/// use tower_levee::breaker::{BreakerLayer, RequestHead, ScopeKeys};
///
/// /// One failure domain and one spend cap per tenant, named by a header.
/// fn by_tenant<'a>(head: &RequestHead<'a>) -> ScopeKeys<'a> {
///     let tenant = head
///         .headers
///         .get("x-tenant")
///         .and_then(|v| v.to_str().ok())
///         .unwrap_or("default");
///     ScopeKeys::new(tenant).billing(Some(tenant))
/// }
///
/// let layer = BreakerLayer::builder().scope_fn(by_tenant).build().unwrap();
/// # let _ = layer;
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct ScopeKeys<'a> {
    /// The failure domain: the breaker's key.
    pub domain: &'a str,
    /// The model, if known: the quota scope is domain × model.
    pub model: Option<&'a str>,
    /// The billing scope, if different from the failure domain.
    pub billing: Option<&'a str>,
}

/// The model a JSON request body names at its top level (a key of that
/// name nested deeper, in a tool's schema say, is not it), for the front
/// doors that hold the body (async-openai, reqwest-middleware): the quota
/// scope is then that model's, and an event names it.
#[cfg(any(feature = "async-openai", feature = "reqwest-middleware"))]
pub(crate) fn model_of_json(body: &[u8]) -> Option<String> {
    let fields = levee_core::request::RequestFields::peek(body).ok()?;
    Some(fields.model())
        .filter(|m| !m.is_empty())
        .map(str::to_owned)
}

/// Whether a request's body is JSON, by its `content-type`.
#[cfg(any(feature = "async-openai", feature = "reqwest-middleware"))]
pub(crate) fn is_json(headers: &http::HeaderMap) -> bool {
    headers
        .get(http::header::CONTENT_TYPE)
        .is_some_and(|v| v.as_bytes().starts_with(b"application/json"))
}

impl<'a> ScopeKeys<'a> {
    /// The scopes of a request to failure domain `domain`, with no model and
    /// the domain as billing scope.
    pub const fn new(domain: &'a str) -> Self {
        ScopeKeys {
            domain,
            model: None,
            billing: None,
        }
    }

    /// Sets the `model` field.
    #[must_use]
    pub const fn model(mut self, model: Option<&'a str>) -> Self {
        self.model = model;
        self
    }

    /// Sets the `billing` field.
    #[must_use]
    pub const fn billing(mut self, billing: Option<&'a str>) -> Self {
        self.billing = billing;
        self
    }
}

/// A user function that names a request's scopes.
pub type ScopeFn = Arc<dyn for<'a> Fn(&RequestHead<'a>) -> ScopeKeys<'a> + Send + Sync>;

/// The default scopes: a [`Scope`] extension where set; otherwise the URI's
/// authority (host and port; a userinfo is dropped, since it may hold a
/// credential) as failure and billing domain, and the model named in the path
/// for the providers that put it there (Azure `deployments/{name}`, Bedrock
/// `model/{id}`, Gemini/Vertex `models/{name}:verb`).
pub fn default_scope<'a>(head: &RequestHead<'a>) -> ScopeKeys<'a> {
    let ext = head.extensions.get::<Scope>();
    let domain = ext
        .and_then(|s| s.domain.as_deref())
        .or_else(|| head.uri.authority().map(|a| without_userinfo(a.as_str())))
        .unwrap_or("default");
    let model = ext
        .and_then(|s| s.model.as_deref())
        .or_else(|| model_in_path(head.uri.path()));
    let billing = ext.and_then(|s| s.billing.as_deref());
    ScopeKeys::new(domain).model(model).billing(billing)
}

/// `host[:port]` of an authority: credentials in its userinfo
/// (`user:sk-…@host`) never become a scope name, so they never reach an
/// event, a log line or a health snapshot.
fn without_userinfo(authority: &str) -> &str {
    match authority.bytes().rposition(|b| b == b'@') {
        Some(at) => &authority[at + 1..],
        None => authority,
    }
}

/// The model or deployment a provider URL path names, if any.
pub(crate) fn model_in_path(path: &str) -> Option<&str> {
    // One pass over the bytes, comparing only at a segment that starts with
    // `d` or `m` (a substring searcher built per call cost more than the
    // rest of the breaker's hot path).
    let bytes = path.as_bytes();
    let mut model = None;
    let mut segment_start = true;
    for (at, &b) in bytes.iter().enumerate() {
        if segment_start && (b == b'd' || b == b'm') {
            let rest = &path[at..];
            // The next segment's name; `None` when there is no next segment.
            let after = |keyword: &str| {
                let value = rest.strip_prefix(keyword)?.strip_prefix('/')?;
                Some(name_of(value.split('/').next().unwrap_or(value)))
            };
            if b == b'd' {
                // Azure: `/openai/deployments/{name}/chat/completions`.
                if let Some(name) = after("deployments") {
                    return name;
                }
            } else if model.is_none() {
                // Bedrock `model/{id}/invoke`; Gemini/Vertex
                // `models/gemini-2.5-pro:generateContent`.
                model = after("models").or_else(|| after("model"));
            }
        }
        segment_start = b == b'/';
    }
    model.flatten()
}

/// A path segment's name, without a `:verb` suffix.
fn name_of(segment: &str) -> Option<&str> {
    let end = segment.find(':').unwrap_or(segment.len());
    (end > 0).then(|| &segment[..end])
}

// === Scopes ===

/// Separates the parts of a composite scope key (`domain/model`).
pub(crate) const KEY_SEPARATOR: char = '/';

/// A request's three scope keys, named by one rule from its [`ScopeKeys`]:
///
/// - the failure domain is the account, or `account/model` when the layer
///   isolates models (`isolate_by_model`) and the request names one;
/// - the quota scope is `account/model`, or the account when no model is named;
/// - the billing scope is the one the request names, else the account.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Scopes<'a> {
    account: &'a str,
    /// Never empty.
    model: Option<&'a str>,
    /// Only when it differs from the account.
    billing: Option<&'a str>,
    /// Whether the failure domain's key carries the model.
    isolated: bool,
}

impl<'a> Scopes<'a> {
    /// The scopes of a request named `keys`.
    #[inline]
    pub(crate) fn new(keys: ScopeKeys<'a>, isolate_by_model: bool) -> Self {
        let model = keys.model.filter(|m| !m.is_empty());
        Scopes {
            account: keys.domain,
            model,
            billing: keys.billing.filter(|b| *b != keys.domain),
            isolated: isolate_by_model && model.is_some(),
        }
    }

    /// The model the request names, if any.
    #[inline]
    pub(crate) fn model(&self) -> Option<&'a str> {
        self.model
    }

    /// Whether the failure domain's key carries the model.
    #[inline]
    pub(crate) fn isolated(&self) -> bool {
        self.isolated
    }

    /// The failure domain's key.
    pub(crate) fn domain_key(&self) -> KeyBuf {
        match self.model.filter(|_| self.isolated) {
            Some(model) => KeyBuf::join(&[self.account, model], KEY_SEPARATOR),
            None => KeyBuf::join(&[self.account], KEY_SEPARATOR),
        }
    }

    /// Whether `key` is the failure domain's key, compared without building it.
    #[inline]
    pub(crate) fn is_domain_key(&self, key: &KeyBuf) -> bool {
        match self.model.filter(|_| self.isolated) {
            Some(model) => key.eq_join(&[self.account, model], KEY_SEPARATOR),
            None => key.as_bytes() == self.account.as_bytes(),
        }
    }

    /// The quota scope's key.
    pub(crate) fn quota_key(&self) -> KeyBuf {
        match self.model {
            Some(model) => KeyBuf::join(&[self.account, model], KEY_SEPARATOR),
            None => KeyBuf::join(&[self.account], KEY_SEPARATOR),
        }
    }

    /// The billing scope's key.
    #[inline]
    pub(crate) fn billing_key(&self) -> &'a str {
        self.billing.unwrap_or(self.account)
    }
}

// === CallScopes ===

/// A call's scopes as its tracker keeps them until the outcome is known:
/// the failure domain's key is in the registry slot the tracker already
/// holds, so only the model (often none) is copied per call.
pub(crate) enum CallScopes {
    /// No model: the failure domain is the quota and billing scope.
    Domain,
    /// The model the request named; the billing scope is the account.
    Model(ModelBuf),
    /// An explicit billing scope (rare, so boxed).
    Explicit(Box<ExplicitScopes>),
}

/// A call's scopes when the request named its billing scope.
pub(crate) struct ExplicitScopes {
    model: Option<ModelBuf>,
    billing: Box<str>,
}

impl CallScopes {
    /// What a call to `scopes` keeps.
    #[inline]
    pub(crate) fn new(scopes: &Scopes<'_>) -> Self {
        let model = scopes.model.map(|m| ModelBuf::join(&[m], KEY_SEPARATOR));
        match (model, scopes.billing) {
            (None, None) => CallScopes::Domain,
            (Some(model), None) => CallScopes::Model(model),
            (model, Some(billing)) => CallScopes::Explicit(Box::new(ExplicitScopes {
                model,
                billing: billing.into(),
            })),
        }
    }

    /// The model the request named, if any.
    pub(crate) fn model(&self) -> Option<&str> {
        match self {
            CallScopes::Domain => None,
            CallScopes::Model(model) => Some(model.as_str()),
            CallScopes::Explicit(explicit) => explicit.model.as_ref().map(|m| m.as_str()),
        }
    }

    /// The call's scopes again, given its failure domain's key and whether
    /// that key carries the model.
    pub(crate) fn resolve<'a>(&'a self, domain_key: &'a str, isolated: bool) -> Scopes<'a> {
        let (model, billing) = match self {
            CallScopes::Domain => (None, None),
            CallScopes::Model(model) => (Some(model.as_str()), None),
            CallScopes::Explicit(explicit) => (
                explicit.model.as_ref().map(|m| m.as_str()),
                Some(&*explicit.billing),
            ),
        };
        let isolated = isolated && model.is_some();
        // `account/model` when isolated: the account is the key's first part.
        let account = match model.filter(|_| isolated) {
            Some(model) => domain_key
                .strip_suffix(model)
                .and_then(|d| d.strip_suffix(KEY_SEPARATOR))
                .unwrap_or(domain_key),
            None => domain_key,
        };
        Scopes {
            account,
            model,
            billing,
            isolated,
        }
    }
}

// === KeyBuf ===

/// Inline capacity of a [`KeyBuf`]: `bedrock-runtime.us-east-1.amazonaws.com`
/// is 39 bytes, most authorities with a model name fit (56 bytes in all).
const INLINE: usize = 54;

/// A scope key: inline up to 54 bytes.
pub(crate) type KeyBuf = InlineStr<INLINE>;

/// A model name held by every call's tracker: inline up to 22 bytes (24 in
/// all), since the tracker moves with every response future.
pub(crate) type ModelBuf = InlineStr<22>;

#[cfg(test)]
mod tests {
    use super::*;

    fn keys(uri: &str, scope: Option<Scope>) -> (String, Option<String>, Option<String>) {
        let mut req = http::Request::builder().uri(uri).body(()).unwrap();
        if let Some(s) = scope {
            req.extensions_mut().insert(s);
        }
        let k = default_scope(&RequestHead::of(&req));
        (
            k.domain.to_owned(),
            k.model.map(str::to_owned),
            k.billing.map(str::to_owned),
        )
    }

    #[test]
    fn default_scope_is_the_authority_and_the_model_in_the_path() {
        assert_eq!(
            keys("https://api.openai.com/v1/chat/completions", None),
            ("api.openai.com".into(), None, None)
        );
        assert_eq!(
            keys(
                "https://res.openai.azure.com/openai/deployments/gpt4o-prod/chat/completions?api-version=2024-02-01",
                None
            ),
            (
                "res.openai.azure.com".into(),
                Some("gpt4o-prod".into()),
                None
            )
        );
        assert_eq!(
            keys(
                "https://generativelanguage.googleapis.com/v1beta/models/gemini-2.5-pro:generateContent",
                None
            )
            .1
            .as_deref(),
            Some("gemini-2.5-pro")
        );
        assert_eq!(
            keys(
                "https://bedrock-runtime.us-east-1.amazonaws.com/model/anthropic.claude-v2/invoke",
                None
            )
            .1
            .as_deref(),
            Some("anthropic.claude-v2")
        );
    }

    /// The rule in its plainest form: the segment after the first
    /// `deployments`, else after the first `model`/`models`, up to a `:verb`.
    fn model_by_segments(path: &str) -> Option<&str> {
        let segments: Vec<&str> = path.split('/').collect();
        let after = |names: &[&str]| {
            let i = segments.iter().position(|s| names.contains(s))?;
            let next = segments.get(i + 1)?;
            let name = next.split(':').next().unwrap_or(next);
            Some((!name.is_empty()).then_some(name))
        };
        after(&["deployments"])
            .or_else(|| after(&["model", "models"]))
            .flatten()
    }

    proptest::proptest! {
        #[test]
        fn model_in_path_agrees_with_the_segment_rule(
            segments in proptest::collection::vec(
                proptest::prop_oneof![
                    proptest::strategy::Just("deployments".to_owned()),
                    proptest::strategy::Just("models".to_owned()),
                    proptest::strategy::Just("model".to_owned()),
                    proptest::strategy::Just(String::new()),
                    "[a-z:.0-9-]{0,12}",
                ],
                0..8,
            ),
            leading_slash in proptest::bool::ANY,
        ) {
            let path = format!("{}{}", if leading_slash { "/" } else { "" }, segments.join("/"));
            proptest::prop_assert_eq!(model_in_path(&path), model_by_segments(&path), "path {:?}", path);
        }
    }

    #[test]
    fn a_scope_extension_overrides_the_defaults() {
        let s = Scope::new()
            .domain("org-a")
            .model("gpt-4o")
            .billing("proj-1");
        assert_eq!(
            keys("https://api.openai.com/v1/chat/completions", Some(s)),
            ("org-a".into(), Some("gpt-4o".into()), Some("proj-1".into()))
        );
    }

    #[test]
    fn the_three_keys_follow_one_rule_and_a_call_rebuilds_them_from_its_domain_key() {
        let named = |domain, model, billing| ScopeKeys {
            domain,
            model,
            billing,
        };
        for (keys, isolate, domain, quota, billing) in [
            (named("org-a", None, None), false, "org-a", "org-a", "org-a"),
            (
                named("org-a", Some("gpt-4o"), None),
                false,
                "org-a",
                "org-a/gpt-4o",
                "org-a",
            ),
            (
                named("org-a", Some("gpt-4o"), None),
                true,
                "org-a/gpt-4o",
                "org-a/gpt-4o",
                "org-a",
            ),
            (
                named("org-a", Some(""), None),
                true,
                "org-a",
                "org-a",
                "org-a",
            ),
            (
                named("org-a", Some("o3"), Some("proj-1")),
                true,
                "org-a/o3",
                "org-a/o3",
                "proj-1",
            ),
            (
                named("org-a", None, Some("org-a")),
                false,
                "org-a",
                "org-a",
                "org-a",
            ),
        ] {
            let scopes = Scopes::new(keys, isolate);
            assert_eq!(scopes.domain_key().as_str(), domain, "{keys:?}");
            assert!(scopes.is_domain_key(&scopes.domain_key()));
            assert_eq!(scopes.quota_key().as_str(), quota, "{keys:?}");
            assert_eq!(scopes.billing_key(), billing, "{keys:?}");
            let kept = CallScopes::new(&scopes);
            let again = kept.resolve(domain, isolate);
            assert_eq!(again.quota_key().as_str(), quota, "{keys:?}");
            assert_eq!(again.billing_key(), billing, "{keys:?}");
            assert_eq!(again.domain_key().as_str(), domain, "{keys:?}");
        }
    }

    #[test]
    fn keybuf_joins_inline_and_on_the_heap_alike() {
        let short = KeyBuf::join(&["api.openai.com", "gpt-4o"], '/');
        assert!(matches!(short, KeyBuf::Inline { .. }));
        assert_eq!(short.as_str(), "api.openai.com/gpt-4o");
        assert!(short.eq_join(&["api.openai.com", "gpt-4o"], '/'));
        assert!(!short.eq_join(&["api.openai.com", "gpt-4"], '/'));
        assert!(!short.eq_join(&["api.openai.com"], '/'));
        let long_part = "x".repeat(INLINE);
        let long = KeyBuf::join(&[&long_part, "m"], '/');
        assert!(matches!(long, KeyBuf::Heap(_)));
        assert!(long.eq_join(&[&long_part, "m"], '/'));
        assert_eq!(KeyBuf::join(&["ü", "é"], '·').as_str(), "ü·é");
    }

    #[test]
    fn keybuf_copies_a_whole_key_inline_up_to_its_capacity() {
        let fits = "k".repeat(INLINE);
        assert!(matches!(KeyBuf::copy(&fits), KeyBuf::Inline { .. }));
        assert_eq!(KeyBuf::copy(&fits).as_str(), fits);
        let over = "k".repeat(INLINE + 1);
        assert!(matches!(KeyBuf::copy(&over), KeyBuf::Heap(_)));
        assert_eq!(KeyBuf::copy(&over).as_str(), over);
        // A single part is a copy: no separator.
        assert_eq!(KeyBuf::join(&["org-ü"], '/').as_str(), "org-ü");
        assert_eq!(KeyBuf::copy("").as_str(), "");
    }
}
