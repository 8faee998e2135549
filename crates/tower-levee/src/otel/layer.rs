//! [`GenAiLayer`] (one span per operation, and the metrics) and
//! [`AttemptLayer`] (one child span per call to a target).

use std::borrow::Cow;
use std::fmt;
use std::sync::Arc;

use opentelemetry::global::BoxedTracer;
use opentelemetry::metrics::Meter;
use opentelemetry::trace::Tracer;
use tower_layer::Layer;

use super::record::{Instruments, Shared};
use super::service::{Attempt, GenAi};

/// The instrumentation scope of Levee's spans and metrics.
pub const SCOPE_NAME: &str = "tower-levee";

/// Records every request as an operation of OpenTelemetry's GenAI
/// conventions: a `CLIENT` span named `{gen_ai.operation.name}
/// {gen_ai.request.model}` that lasts until the answer's body ends, and the
/// client metrics. Put it outermost, above a failover or a breaker. See the
/// [module docs](super).
#[derive(Clone)]
pub struct GenAiLayer {
    /// `None` when off.
    shared: Option<Arc<Shared>>,
}

impl GenAiLayer {
    /// A layer recording through the global tracer and meter providers
    /// (`opentelemetry::global`), as they are when the layer is built:
    /// install them first.
    pub fn new() -> Self {
        GenAiLayer {
            shared: Some(Arc::new(Shared {
                tracer: Arc::new(opentelemetry::global::tracer(SCOPE_NAME)),
                instruments: Instruments::new(&opentelemetry::global::meter(SCOPE_NAME)),
                provider: None,
            })),
        }
    }

    /// A layer that records nothing and costs a branch a call: for a stack
    /// whose type must not change with a setting (a server whose
    /// configuration turns OpenTelemetry on or off). The methods below turn
    /// it on.
    pub fn disabled() -> Self {
        GenAiLayer { shared: None }
    }

    /// Records spans through `tracer` (an SDK's, from its provider's
    /// `tracer("tower-levee")`).
    pub fn tracer<T>(self, tracer: T) -> Self
    where
        T: Tracer + Send + Sync + 'static,
        T::Span: Send + Sync + 'static,
    {
        self.with(|shared| shared.tracer = Arc::new(BoxedTracer::new(Box::new(tracer))))
    }

    /// Records metrics through `meter`.
    pub fn meter(self, meter: &Meter) -> Self {
        self.with(|shared| shared.instruments = Instruments::new(meter))
    }

    /// Names the provider (`gen_ai.provider.name`) of every request, where
    /// its host does not say (a self-hosted server, a proxy): `"vllm"`.
    /// An [`AttemptLayer`] below, where the request is served, names it
    /// in its place.
    pub fn provider(self, name: impl Into<Cow<'static, str>>) -> Self {
        let name = name.into();
        self.with(|shared| shared.provider = Some(name))
    }

    fn with(self, change: impl FnOnce(&mut Shared)) -> Self {
        let on = self
            .shared
            .or(GenAiLayer::new().shared)
            .expect("new() is on");
        let mut shared = Shared {
            tracer: Arc::clone(&on.tracer),
            instruments: on.instruments.clone(),
            provider: on.provider.clone(),
        };
        change(&mut shared);
        GenAiLayer {
            shared: Some(Arc::new(shared)),
        }
    }
}

impl Default for GenAiLayer {
    fn default() -> Self {
        Self::new()
    }
}

impl fmt::Debug for GenAiLayer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("GenAiLayer")
            .field("on", &self.shared.is_some())
            .field(
                "provider",
                &self.shared.as_ref().and_then(|s| s.provider.as_ref()),
            )
            .finish_non_exhaustive()
    }
}

impl<S> Layer<S> for GenAiLayer {
    type Service = GenAi<S>;

    fn layer(&self, inner: S) -> GenAi<S> {
        GenAi::new(inner, self.shared.clone())
    }
}

/// One child span (`levee.attempt`, kind `CLIENT`) per call to a target,
/// under the [`GenAiLayer`]'s span and through its tracer: which target,
/// which attempt, the provider and server it reached, and what came back.
/// Put it at the bottom of each failover target's stack, nearest the
/// client, where the request's URI is the provider's. It also tells the
/// operation above which target served it. A call with no operation above
/// (no [`GenAiLayer`], or one that is off) is not recorded.
#[derive(Clone, Debug, Default)]
pub struct AttemptLayer {
    target: Option<Cow<'static, str>>,
    provider: Option<Cow<'static, str>>,
}

impl AttemptLayer {
    /// A layer for a target its spans do not name.
    pub fn new() -> Self {
        Self::default()
    }

    /// Names the target (`levee.target`; the operation's `levee.served_by`).
    pub fn target(mut self, name: impl Into<Cow<'static, str>>) -> Self {
        self.target = Some(name.into());
        self
    }

    /// Names the provider where the target's host does not say.
    pub fn provider(mut self, name: impl Into<Cow<'static, str>>) -> Self {
        self.provider = Some(name.into());
        self
    }
}

impl<S> Layer<S> for AttemptLayer {
    type Service = Attempt<S>;

    fn layer(&self, inner: S) -> Attempt<S> {
        Attempt::new(inner, self.target.clone(), self.provider.clone())
    }
}
