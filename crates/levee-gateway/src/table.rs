//! The routing table: for each route's model, a Levee stack per API, built
//! from the configuration with the library's own layers. Rebuilt whole on
//! reload; a target whose settings did not change keeps its breaker, gates,
//! parks and bulkhead (its state) from the table before.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use hyper::body::Incoming;
use levee_core::classify::{self, ProviderClassifier, Rules};
use levee_redis::FleetHandle;
use tower::Layer;
use tower_levee::BoxError;
use tower_levee::api::ApiDialect;
use tower_levee::breaker::BreakerLayer;
use tower_levee::bulkhead::BulkheadLayer;
use tower_levee::client_limit::{ClientId, ClientLimit, ClientLimitLayer, ClientLimits};
use tower_levee::config::LeveeConfig;
use tower_levee::failover::{Failover, FailoverHandle, Target};
use tower_levee::metrics::MetricsReporter;
use tower_levee::retry::{Retry, RetryBudget, RetryBudgetLayer};

use crate::config::{GatewayConfig, ProbeConfig, TargetConfig, TargetDialect};
use crate::events::Events;
use crate::intern::intern;
use crate::secret::Secret;
use crate::spare::{self, StackId, StackIds};
use crate::upstream::{ModelSpan, Payload, TargetRewrite, Upstream};
use levee_core::classify::Dialect;
use tower_levee::otel::{Attempt, AttemptLayer, GenAi, GenAiLayer, names};

/// A route's stack for one API: the GenAI record (off without `[otel]`) →
/// client limits → retry budget → failover → per target (bulkhead →
/// breaker, gate, park, pacing, stream watch → the attempt's record → the
/// upstream call with its attempt timeout).
pub(crate) type Stack = GenAi<ClientLimit<Retry<Failover<Payload, Incoming, Attempt<Upstream>>>>>;

/// A target's `gen_ai.provider.name` where its host names none (a local
/// or self-hosted endpoint): its dialect's.
fn provider_name(target: &TargetConfig) -> &'static str {
    let dialect = match target.dialect {
        TargetDialect::OpenAi => Dialect::OpenAi,
        TargetDialect::Azure => Dialect::Azure,
        TargetDialect::Anthropic => Dialect::Anthropic,
    };
    names::provider_of_dialect(dialect).unwrap_or(names::UNKNOWN_PROVIDER)
}

/// One API of one route.
pub(crate) struct RouteApi {
    stack: Stack,
    id: StackId,
    pub(crate) failover: FailoverHandle,
    pub(crate) budget: Arc<RetryBudget>,
}

/// One route: its model, and a stack for each API its targets speak.
pub(crate) struct Route {
    pub(crate) model: String,
    /// `model`, interned: the route's label in metrics.
    pub(crate) label: &'static str,
    pub(crate) openai: Option<RouteApi>,
    pub(crate) anthropic: Option<RouteApi>,
    /// The cap on a refusal's `Retry-After`.
    pub(crate) max_retry_after: Duration,
}

impl RouteApi {
    /// Sends `request` through this API's stack (a spare clone of it: see
    /// [`crate::spare`]).
    pub(crate) async fn call(
        &self,
        request: http::Request<Payload>,
    ) -> Result<<Stack as tower::Service<http::Request<Payload>>>::Response, BoxError> {
        spare::call(self.id, &self.stack, request).await
    }
}

impl Route {
    pub(crate) fn api(&self, dialect: ApiDialect) -> Option<&RouteApi> {
        match dialect {
            ApiDialect::OpenAi => self.openai.as_ref(),
            _ => self.anthropic.as_ref(),
        }
    }
}

/// An authenticated caller: the extension its requests carry, and its
/// name as a metrics label.
#[derive(Clone, Debug)]
pub(crate) struct Caller {
    pub(crate) id: ClientId,
    pub(crate) label: &'static str,
}

/// A target's state under one set of settings: its breaker layer (breaker,
/// gates, parks, pacing) and its bulkhead.
pub(crate) struct TargetState {
    pub(crate) name: String,
    /// What the state was built from: a change of any of it starts afresh.
    identity: String,
    pub(crate) breaker: BreakerLayer,
    pub(crate) bulkhead: BulkheadLayer,
}

/// Everything a request is served with, swapped whole on reload.
pub(crate) struct Table {
    pub(crate) config: Arc<GatewayConfig>,
    routes: HashMap<String, Route>,
    /// The routes' models, sorted.
    pub(crate) models: Vec<String>,
    clients: Vec<(Secret, Caller)>,
    pub(crate) client_limits: ClientLimitLayer,
    /// Every target state, by target name (a target serving routes with
    /// different settings has one per setting).
    pub(crate) targets: BTreeMap<String, Vec<Arc<TargetState>>>,
    pub(crate) reporter: MetricsReporter,
    /// Whether requests are recorded for OpenTelemetry (`[otel]`).
    pub(crate) recorded: bool,
    _fleet: Option<FleetHandle>,
}

impl Table {
    /// Builds the table for `config`, keeping the state of every target
    /// `previous` had under the same settings.
    pub(crate) fn build(
        config: GatewayConfig,
        previous: Option<&Table>,
        events: &Arc<Events>,
        genai: &GenAiLayer,
        recorded: bool,
    ) -> Result<Table, BoxError> {
        let config = Arc::new(config);
        let mut states: HashMap<String, Arc<TargetState>> = HashMap::new();
        let kept: HashMap<&str, &Arc<TargetState>> = previous
            .into_iter()
            .flat_map(|p| p.targets.values().flatten())
            .map(|s| (s.identity.as_str(), s))
            .collect();

        // The rules, once: a change of rules is a change of every target's
        // classifier, so no state is kept across it.
        let rules_id = rules_fingerprint(&config.rules);
        let mut client_limits = ClientLimitLayer::new();
        for c in &config.clients {
            let mut limits = ClientLimits::new();
            if let Some(n) = c.requests_per_minute {
                limits = limits.requests_per_minute(n);
            }
            if let Some(n) = c.tokens_per_minute {
                limits = limits.tokens_per_minute(n);
            }
            client_limits = client_limits.client(c.name.as_str(), limits);
        }
        let clients = config
            .clients
            .iter()
            .map(|c| {
                let caller = Caller {
                    id: ClientId::new(c.name.as_str()),
                    label: intern(&c.name),
                };
                (c.key.clone(), caller)
            })
            .collect();

        let mut reporter = MetricsReporter::new();
        let mut routes = HashMap::new();
        let mut ids = StackIds::new();
        for route in &config.routes {
            let levee = &route.levee;
            let mut apis = [None, None];
            for (slot, dialect) in [ApiDialect::OpenAi, ApiDialect::Anthropic]
                .into_iter()
                .enumerate()
            {
                let targets: Vec<&TargetConfig> = route
                    .targets
                    .iter()
                    .filter_map(|name| config.target(name))
                    .filter(|t| serves(t.dialect) == dialect)
                    .collect();
                if targets.is_empty() {
                    continue;
                }
                let upstream = Upstream::new(levee.retry.attempt_timeout);
                let mut failover = Failover::<Payload, Incoming, Attempt<Upstream>>::builder();
                let budget = Arc::new(RetryBudget::from_config(levee.retry.budget));
                // Each target's active probe, if it has one (the config
                // refuses one where shadow probes are off).
                let probes = levee
                    .failover
                    .shadow_probes_for(Some(budget.clone()))
                    .map(|shadow| {
                        targets
                            .iter()
                            .fold(shadow, |shadow, target| match &target.probe {
                                Some(probe) => {
                                    let probe = probe.clone();
                                    shadow
                                        .active(target.name.as_str(), move || active_probe(&probe))
                                }
                                None => shadow,
                            })
                    });
                for target in targets {
                    let identity = identity(target, levee, &rules_id)?;
                    let state = match states.get(&identity) {
                        Some(state) => state.clone(),
                        None => {
                            let state = match kept.get(identity.as_str()) {
                                Some(state) => Arc::clone(state),
                                None => Arc::new(new_state(
                                    target,
                                    levee,
                                    &config.rules,
                                    identity.clone(),
                                    events,
                                )?),
                            };
                            states.insert(identity, state.clone());
                            state
                        }
                    };
                    let rewrite = TargetRewrite::new(target, &route.model);
                    let attempt = AttemptLayer::new()
                        .target(target.name.clone())
                        .provider(provider_name(target))
                        .layer(upstream.clone());
                    let mut t = Target::new(target.name.as_str(), attempt)
                        .breaker(state.breaker.clone())
                        .bulkhead(state.bulkhead.clone())
                        .rewrite(move |req| rewrite.apply(req));
                    if let Some(p) = &target.provider {
                        t = t.provider(p.as_str());
                    }
                    if let Some(r) = &target.region {
                        t = t.region(r.as_str());
                    }
                    if let Some(p) = &target.pool {
                        t = t.pool(p.as_str());
                    }
                    failover = failover.target(t);
                }
                let mut failover = levee.failover.apply(failover)?;
                if let Some(probes) = probes {
                    failover = failover.shadow_probes(probes);
                }
                let failover = failover.build()?;
                let handle = failover.handle();
                let retry = levee
                    .retry
                    .apply(RetryBudgetLayer::builder(budget.clone()))?
                    .build()?;
                let stack = genai.layer(client_limits.layer(retry.layer(failover)));
                let label = format!("{}:{}", route.model, dialect.as_str());
                reporter = reporter
                    .failover(label.as_str(), handle.clone())
                    .budget(label.as_str(), budget.clone());
                apis[slot] = Some(RouteApi {
                    stack,
                    id: ids.next(),
                    failover: handle,
                    budget,
                });
            }
            let [openai, anthropic] = apis;
            routes.insert(
                route.model.clone(),
                Route {
                    model: route.model.clone(),
                    label: intern(&route.model),
                    openai,
                    anthropic,
                    max_retry_after: levee.failover.max_retry_after,
                },
            );
        }

        let mut targets: BTreeMap<String, Vec<Arc<TargetState>>> = BTreeMap::new();
        for state in states.into_values() {
            targets.entry(state.name.clone()).or_default().push(state);
        }
        for list in targets.values() {
            for (i, state) in list.iter().enumerate() {
                let label = state_label(&state.name, i);
                reporter = reporter
                    .breaker(label.as_str(), state.breaker.handle())
                    .bulkhead(state.bulkhead.clone());
            }
        }
        let fleet = match &config.fleet {
            Some(fleet) => {
                let mut builder = fleet.builder();
                for list in targets.values() {
                    for (i, state) in list.iter().enumerate() {
                        builder = builder
                            .attach_named(state_label(&state.name, i), &state.breaker.handle());
                    }
                }
                Some(builder.spawn(fleet.store()?)?)
            }
            None => None,
        };
        let mut models: Vec<String> = routes.keys().cloned().collect();
        models.sort_unstable();
        Ok(Table {
            config,
            routes,
            models,
            clients,
            client_limits,
            targets,
            reporter,
            recorded,
            _fleet: fleet,
        })
    }

    /// The route of `model`.
    pub(crate) fn route(&self, model: &str) -> Option<&Route> {
        self.routes.get(model)
    }

    /// Every route, by model.
    pub(crate) fn routes(&self) -> impl Iterator<Item = &Route> {
        self.models.iter().filter_map(|m| self.routes.get(m))
    }

    /// Whether callers must present a key.
    pub(crate) fn requires_key(&self) -> bool {
        !self.clients.is_empty()
    }

    /// The caller whose key is `presented`. Every key is compared, so the
    /// time taken does not say which came close.
    pub(crate) fn client(&self, presented: &[u8]) -> Option<&Caller> {
        let mut found = None;
        for (key, id) in &self.clients {
            if key.matches(presented) && found.is_none() {
                found = Some(id);
            }
        }
        found
    }
}

/// A target's active probe as a caller's request to the gateway; the
/// target's rewrite then points it at the target, with its key, and
/// renames a model its body names, as for a caller's request.
fn active_probe(probe: &ProbeConfig) -> http::Request<Payload> {
    let body = probe.body.clone().map(Bytes::from).unwrap_or_default();
    let model = levee_core::request::RequestFields::peek(&body)
        .ok()
        .map(|f| ModelSpan(f.model_span()));
    let mut request = http::Request::new(Payload(body));
    *request.method_mut() = probe.method.clone();
    *request.uri_mut() = http::Uri::from(probe.path.clone());
    if probe.body.is_some() {
        request.headers_mut().insert(
            http::header::CONTENT_TYPE,
            http::HeaderValue::from_static("application/json"),
        );
    }
    if let Some(model) = model {
        request.extensions_mut().insert(model);
    }
    request
}

/// The API a target of `dialect` serves.
fn serves(dialect: TargetDialect) -> ApiDialect {
    match dialect {
        TargetDialect::OpenAi | TargetDialect::Azure => ApiDialect::OpenAi,
        TargetDialect::Anthropic => ApiDialect::Anthropic,
    }
}

/// The rules as a short key, the same for the same rules within this
/// process (a reload compares it).
fn rules_fingerprint(rules: &Rules) -> String {
    use std::hash::{Hash, Hasher};
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    for rule in rules.iter() {
        format!("{rule:?}").hash(&mut hasher);
    }
    format!("{:016x}", hasher.finish())
}

/// The classifier of `target`'s breaker: the user's rules first, and the
/// bodies of 2xx answers read where its provider is known to answer `200`
/// with an error.
fn classifier(target: &TargetConfig, rules: &Rules) -> ProviderClassifier {
    let host = target.base_url.host().unwrap_or_default();
    ProviderClassifier::builder()
        .rules(rules.clone())
        .peek_success(classify::answers_errors_with_200(host))
        .build()
}

/// A target state's name in metrics and the fleet: the target's, with
/// `#n` for its second setting on.
fn state_label(name: &str, i: usize) -> String {
    if i == 0 {
        name.to_owned()
    } else {
        format!("{name}#{i}")
    }
}

/// What `target`'s state depends on: its endpoint, its scopes, the
/// settings of its breaker layer and bulkhead, and the classification
/// rules (never its key: a rotated key keeps the state).
fn identity(
    target: &TargetConfig,
    levee: &LeveeConfig,
    rules_id: &str,
) -> Result<String, BoxError> {
    let settings = serde_json::json!({
        "rules": rules_id,
        "name": target.name,
        "base_url": target.base_url.to_string(),
        "dialect": format!("{:?}", target.dialect),
        "account": target.account,
        "breaker": levee.breaker,
        "gate": levee.gate,
        "park": levee.park,
        "pace": levee.pace,
        "breaker_layer": levee.breaker_layer,
        "bulkhead": levee.bulkhead,
    });
    Ok(serde_json::to_string(&settings)?)
}

fn new_state(
    target: &TargetConfig,
    levee: &LeveeConfig,
    rules: &Rules,
    identity: String,
    events: &Arc<Events>,
) -> Result<TargetState, BoxError> {
    let events = events.clone();
    let name = target.name.clone();
    let breaker = levee
        .breaker_layer()?
        .classifier(classifier(target, rules))
        .on_event(move |event| events.record(&name, event))
        .build()?;
    let mut bulkhead = BulkheadLayer::named(target.name.as_str(), levee.bulkhead.max_concurrent);
    if let Some(wait) = levee.bulkhead.max_wait {
        bulkhead = bulkhead.max_wait(wait);
    }
    Ok(TargetState {
        name: target.name.clone(),
        identity,
        breaker,
        bulkhead,
    })
}
