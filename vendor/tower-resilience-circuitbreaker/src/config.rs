use std::sync::atomic::AtomicU8;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::Mutex;
use tower_resilience_core::EventListeners;

use crate::circuit::{Circuit, CircuitState};
use crate::classifier::{DefaultClassifier, FnClassifier};
use crate::events::CircuitBreakerEvent;
use crate::handle::CircuitBreakerHandle;
use crate::layer::SharedCircuit;

/// Type of sliding window used for tracking calls.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SlidingWindowType {
    /// Count-based window tracks the last N calls.
    CountBased,
    /// Time-based window tracks calls within a time duration.
    TimeBased,
}

/// Trip-condition model used by the circuit breaker.
///
/// The default ([`Self::SlidingWindow`]) trips when the failure *rate* over the
/// configured sliding window exceeds `failure_rate_threshold`. The alternative
/// [`Self::ConsecutiveFailures`] trips when `k` failures occur in a row with no
/// successful call between them. The latter matches the default behavior of
/// `ex_resilience` (the Elixir companion library) and is common in agent /
/// LLM-retry contexts where an in-a-row burst matters more than the rate.
///
/// See the crate-level docs for a table mapping each model to its trip
/// condition.
///
/// # Example
///
/// ```rust
/// use tower_resilience_circuitbreaker::{CircuitBreakerLayer, FailureModel};
///
/// // Sliding-window failure rate (default).
/// let layer = CircuitBreakerLayer::builder()
///     .failure_rate_threshold(0.5)
///     .build()?;
///
/// // Trip after 5 consecutive failures.
/// let layer = CircuitBreakerLayer::builder()
///     .failure_model(FailureModel::ConsecutiveFailures { k: 5 })
///     .build()?;
///
/// // Same, via the convenience shortcut.
/// let layer = CircuitBreakerLayer::builder()
///     .consecutive_failures(5)
///     .build()?;
/// # Ok::<(), tower_resilience_circuitbreaker::CircuitBreakerConfigError>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum FailureModel {
    /// Trip when the failure rate over the sliding window crosses the
    /// configured `failure_rate_threshold`. This is the default.
    ///
    /// Honors all sliding-window settings: `sliding_window_type`,
    /// `sliding_window_size`, `sliding_window_duration`, and
    /// `minimum_number_of_calls`.
    #[default]
    SlidingWindow,
    /// Trip after `k` consecutive failures with no intervening success.
    ///
    /// Ignores `failure_rate_threshold`, `sliding_window_type`, and the
    /// minimum-calls / window-size gating: a single sequence of `k`
    /// classified failures opens the circuit. A single successful call
    /// (per the configured failure classifier) resets the counter.
    ///
    /// Slow-call detection (`slow_call_duration_threshold` /
    /// `slow_call_rate_threshold`) continues to evaluate against the
    /// sliding-window stats and can still open the circuit independently.
    ConsecutiveFailures {
        /// The number of consecutive failures required to trip the circuit.
        /// Must be > 0; a builder with `k == 0` returns
        /// [`CircuitBreakerConfigError::ZeroConsecutiveFailures`] from `build()`.
        k: usize,
    },
}

/// Configuration for the circuit breaker pattern.
///
/// The type parameter `C` is the failure classifier type, which determines
/// how results are classified as failures.
///
/// - `CircuitBreakerConfig<DefaultClassifier>` - uses the default classifier (errors = failures)
/// - `CircuitBreakerConfig<FnClassifier<F>>` - uses a custom classifier function
pub struct CircuitBreakerConfig<C> {
    pub(crate) failure_rate_threshold: f64,
    pub(crate) sliding_window_type: SlidingWindowType,
    pub(crate) sliding_window_size: usize,
    pub(crate) sliding_window_duration: Option<Duration>,
    pub(crate) wait_duration_in_open: Duration,
    pub(crate) permitted_calls_in_half_open: usize,
    pub(crate) minimum_number_of_calls: usize,
    pub(crate) failure_classifier: C,
    pub(crate) slow_call_duration_threshold: Option<Duration>,
    pub(crate) slow_call_rate_threshold: f64,
    pub(crate) failure_model: FailureModel,
    pub(crate) event_listeners: EventListeners<CircuitBreakerEvent>,
    pub(crate) name: String,
    pub(crate) backpressure: bool,
    pub(crate) manual_mode: bool,
}

/// Builder for configuring and constructing a circuit breaker.
///
/// The type parameter `C` is the failure classifier type. By default, this is
/// `DefaultClassifier` which treats all errors as failures. When you call
/// `.failure_classifier()` with a custom function, the type changes to
/// `FnClassifier<F>`.
///
/// # Default Usage (no type parameters needed)
///
/// ```rust
/// use tower_resilience_circuitbreaker::CircuitBreakerLayer;
///
/// // No type parameters required!
/// let layer = CircuitBreakerLayer::builder()
///     .failure_rate_threshold(0.5)
///     .build()?;
/// # Ok::<(), tower_resilience_circuitbreaker::CircuitBreakerConfigError>(())
/// ```
///
/// # Custom Classifier (types inferred from closure)
///
/// ```rust
/// use tower_resilience_circuitbreaker::CircuitBreakerLayer;
///
/// let layer = CircuitBreakerLayer::builder()
///     .failure_classifier(|result: &Result<String, std::io::Error>| {
///         match result {
///             Ok(_) => false,
///             // Don't count timeouts as failures
///             Err(e) if e.kind() == std::io::ErrorKind::TimedOut => false,
///             Err(_) => true,
///         }
///     })
///     .build()?;
/// # Ok::<(), tower_resilience_circuitbreaker::CircuitBreakerConfigError>(())
/// ```
pub struct CircuitBreakerConfigBuilder<C = DefaultClassifier> {
    failure_rate_threshold: f64,
    sliding_window_type: SlidingWindowType,
    sliding_window_size: usize,
    sliding_window_duration: Option<Duration>,
    wait_duration_in_open: Duration,
    permitted_calls_in_half_open: usize,
    failure_classifier: C,
    minimum_number_of_calls: Option<usize>,
    slow_call_duration_threshold: Option<Duration>,
    slow_call_rate_threshold: f64,
    failure_model: FailureModel,
    event_listeners: EventListeners<CircuitBreakerEvent>,
    name: String,
    backpressure: bool,
    manual_mode: bool,
}

impl Default for CircuitBreakerConfigBuilder<DefaultClassifier> {
    fn default() -> Self {
        Self::new()
    }
}

impl CircuitBreakerConfigBuilder<DefaultClassifier> {
    /// Creates a new builder with default values.
    ///
    /// The default classifier treats all `Err` results as failures.
    /// No type parameters are required when using the default classifier.
    pub fn new() -> Self {
        Self {
            failure_rate_threshold: 0.5,
            sliding_window_type: SlidingWindowType::CountBased,
            sliding_window_size: 100,
            sliding_window_duration: None,
            wait_duration_in_open: Duration::from_secs(30),
            permitted_calls_in_half_open: 1,
            failure_classifier: DefaultClassifier,
            minimum_number_of_calls: None,
            slow_call_duration_threshold: None,
            slow_call_rate_threshold: 1.0,
            failure_model: FailureModel::SlidingWindow,
            event_listeners: EventListeners::new(),
            name: String::from("<unnamed>"),
            backpressure: false,
            manual_mode: false,
        }
    }
}

impl<C> CircuitBreakerConfigBuilder<C> {
    /// Sets the failure rate threshold at which the circuit will open.
    ///
    /// Default: 0.5 (50%)
    pub fn failure_rate_threshold(mut self, rate: f64) -> Self {
        self.failure_rate_threshold = rate;
        self
    }

    /// Sets the type of sliding window to use.
    ///
    /// Default: CountBased
    pub fn sliding_window_type(mut self, window_type: SlidingWindowType) -> Self {
        self.sliding_window_type = window_type;
        self
    }

    /// Sets the size of the sliding window for failure rate calculation (count-based).
    ///
    /// For count-based windows, this is the number of calls to track.
    /// For time-based windows, this is used as the minimum calls threshold if not set explicitly.
    ///
    /// Default: 100
    pub fn sliding_window_size(mut self, size: usize) -> Self {
        self.sliding_window_size = size;
        self
    }

    /// Sets the duration of the sliding window (time-based only).
    ///
    /// Only used when `sliding_window_type` is `TimeBased`.
    /// Calls older than this duration are excluded from failure rate calculation.
    ///
    /// Default: None (must be set for time-based windows)
    pub fn sliding_window_duration(mut self, duration: Duration) -> Self {
        self.sliding_window_duration = Some(duration);
        self
    }

    /// Sets the duration the circuit remains open before transitioning to half-open.
    ///
    /// Default: 30 seconds
    pub fn wait_duration_in_open(mut self, duration: Duration) -> Self {
        self.wait_duration_in_open = duration;
        self
    }

    /// Sets the number of permitted calls in the half-open state.
    ///
    /// Default: 1
    pub fn permitted_calls_in_half_open(mut self, n: usize) -> Self {
        self.permitted_calls_in_half_open = n;
        self
    }

    /// Sets the minimum number of calls before failure rate is evaluated.
    ///
    /// Default: same as sliding_window_size
    pub fn minimum_number_of_calls(mut self, n: usize) -> Self {
        self.minimum_number_of_calls = Some(n);
        self
    }

    /// Sets the duration threshold for considering a call "slow".
    ///
    /// When set, calls exceeding this duration will be tracked and can trigger
    /// circuit opening based on `slow_call_rate_threshold`.
    ///
    /// Default: None (slow call detection disabled)
    pub fn slow_call_duration_threshold(mut self, duration: Duration) -> Self {
        self.slow_call_duration_threshold = Some(duration);
        self
    }

    /// Sets the slow call rate threshold at which the circuit will open.
    ///
    /// Only applies when `slow_call_duration_threshold` is set.
    ///
    /// Default: 1.0 (100%, effectively disabled)
    pub fn slow_call_rate_threshold(mut self, rate: f64) -> Self {
        self.slow_call_rate_threshold = rate;
        self
    }

    /// Selects the trip-condition model.
    ///
    /// See [`FailureModel`] for the available variants and their trip
    /// conditions. The default is [`FailureModel::SlidingWindow`].
    ///
    /// # Example
    ///
    /// ```rust
    /// use tower_resilience_circuitbreaker::{CircuitBreakerLayer, FailureModel};
    ///
    /// let layer = CircuitBreakerLayer::builder()
    ///     .failure_model(FailureModel::ConsecutiveFailures { k: 5 })
    ///     .build()?;
    /// # Ok::<(), tower_resilience_circuitbreaker::CircuitBreakerConfigError>(())
    /// ```
    pub fn failure_model(mut self, model: FailureModel) -> Self {
        self.failure_model = model;
        self
    }

    /// Shortcut for [`Self::failure_model`] with
    /// [`FailureModel::ConsecutiveFailures`].
    ///
    /// # Errors
    ///
    /// The [`build`](Self::build) call returns
    /// [`CircuitBreakerConfigError::ZeroConsecutiveFailures`] if `k == 0`.
    ///
    /// # Example
    ///
    /// ```rust
    /// use tower_resilience_circuitbreaker::CircuitBreakerLayer;
    ///
    /// // Trip after 3 consecutive failures.
    /// let layer = CircuitBreakerLayer::builder()
    ///     .consecutive_failures(3)
    ///     .build()?;
    /// # Ok::<(), tower_resilience_circuitbreaker::CircuitBreakerConfigError>(())
    /// ```
    pub fn consecutive_failures(mut self, k: usize) -> Self {
        self.failure_model = FailureModel::ConsecutiveFailures { k };
        self
    }

    /// Give this breaker a human-readable name for observability.
    ///
    /// Default: `<unnamed>`
    pub fn name<N: Into<String>>(mut self, n: N) -> Self {
        self.name = n.into();
        self
    }

    /// Enables backpressure mode.
    ///
    /// In backpressure mode, the circuit breaker gates inner readiness on circuit
    /// state in `poll_ready()`. When the circuit is open, `poll_ready()` returns
    /// `Poll::Pending` and wakes the caller after `wait_duration_in_open` elapses,
    /// instead of returning `CircuitBreakerError::OpenCircuit`.
    ///
    /// This integrates with Tower's load balancing, buffer layers, and the standard
    /// `service.ready().await` pattern.
    ///
    /// When backpressure mode is enabled:
    /// - a conforming `ready().await; call(...)` flow waits rather than returning
    ///   `CircuitBreakerError::OpenCircuit`
    /// - Callers naturally wait for the circuit to transition to half-open
    ///
    /// Default: `false` (rejection mode)
    ///
    /// # Example
    /// ```rust,no_run
    /// use tower_resilience_circuitbreaker::CircuitBreakerLayer;
    ///
    /// let layer = CircuitBreakerLayer::builder()
    ///     .failure_rate_threshold(0.5)
    ///     .backpressure()
    ///     .build()?;
    /// # Ok::<(), tower_resilience_circuitbreaker::CircuitBreakerConfigError>(())
    /// ```
    pub fn backpressure(mut self) -> Self {
        self.backpressure = true;
        self
    }

    /// Enables manual/external-only control mode.
    ///
    /// In manual mode the circuit never trips or recovers on its own:
    /// `record_success`/`record_failure` still update counters and emit
    /// their usual [`CircuitBreakerEvent`](crate::CircuitBreakerEvent)s and
    /// metrics for observability, but the sliding-window evaluation, the
    /// half-open success/failure thresholds, and the `Open -> HalfOpen`
    /// recovery timer (`wait_duration_in_open`) are all disabled. Once the
    /// circuit is opened, it stays open until something explicitly closes
    /// or resets it.
    ///
    /// State changes only in response to an explicit
    /// [`force_open`](crate::CircuitBreaker::force_open),
    /// [`force_closed`](crate::CircuitBreaker::force_closed), or
    /// [`reset`](crate::CircuitBreaker::reset) call -- typically issued
    /// through a [`CircuitBreakerHandle`](crate::CircuitBreakerHandle)
    /// shared with an external controller (health checks, admin APIs,
    /// fleet control). This gives a simple external on/off switch, matching
    /// the broader circuit-breaker scope requested in
    /// [tower-rs/tower#855](https://github.com/tower-rs/tower/pull/855).
    ///
    /// Default: `false` (automatic trip/recovery)
    ///
    /// # Example
    /// ```rust
    /// use tower_resilience_circuitbreaker::CircuitBreakerLayer;
    ///
    /// let (layer, handle) = CircuitBreakerLayer::builder()
    ///     .manual_mode()
    ///     .build_with_handle()?;
    ///
    /// // Apply `layer` to a service...
    /// // The circuit stays closed no matter how the inner service behaves,
    /// // until something calls `handle.force_open()`.
    /// let _ = layer;
    /// let _ = handle;
    /// # Ok::<(), tower_resilience_circuitbreaker::CircuitBreakerConfigError>(())
    /// ```
    pub fn manual_mode(mut self) -> Self {
        self.manual_mode = true;
        self
    }

    /// Sets a custom failure classifier function.
    ///
    /// The classifier determines which results should be counted as failures
    /// for the purpose of calculating the failure rate.
    ///
    /// This method changes the builder's type from `CircuitBreakerConfigBuilder<C>`
    /// to `CircuitBreakerConfigBuilder<FnClassifier<F>>`, binding the response and
    /// error types based on the closure signature.
    ///
    /// # Example
    ///
    /// ```rust
    /// use tower_resilience_circuitbreaker::CircuitBreakerLayer;
    /// use std::io::{Error, ErrorKind};
    ///
    /// let layer = CircuitBreakerLayer::builder()
    ///     .failure_classifier(|result: &Result<String, Error>| {
    ///         match result {
    ///             Ok(_) => false,
    ///             // Don't count timeouts as failures
    ///             Err(e) if e.kind() == ErrorKind::TimedOut => false,
    ///             Err(_) => true,
    ///         }
    ///     })
    ///     .build()?;
    /// # Ok::<(), tower_resilience_circuitbreaker::CircuitBreakerConfigError>(())
    /// ```
    ///
    /// # Services with `Error = Infallible`
    ///
    /// For services that never return errors (e.g., those that encode errors in
    /// the response body), consider using [`classify_response`](Self::classify_response)
    /// instead, which is simpler for this use case.
    ///
    /// ```rust
    /// use tower_resilience_circuitbreaker::CircuitBreakerLayer;
    /// use std::convert::Infallible;
    ///
    /// // Assuming Response has a status() method
    /// # struct Response { status_code: u16 }
    /// # impl Response { fn status(&self) -> u16 { self.status_code } }
    ///
    /// let layer = CircuitBreakerLayer::builder()
    ///     .failure_classifier(|result: &Result<Response, Infallible>| {
    ///         match result {
    ///             Ok(response) => response.status() >= 500,
    ///             Err(_) => unreachable!(), // Infallible can never be constructed
    ///         }
    ///     })
    ///     .build()?;
    /// # Ok::<(), tower_resilience_circuitbreaker::CircuitBreakerConfigError>(())
    /// ```
    pub fn failure_classifier<F, Res, Err>(
        self,
        classifier: F,
    ) -> CircuitBreakerConfigBuilder<FnClassifier<F>>
    where
        F: Fn(&Result<Res, Err>) -> bool + Send + Sync + 'static,
    {
        CircuitBreakerConfigBuilder {
            failure_rate_threshold: self.failure_rate_threshold,
            sliding_window_type: self.sliding_window_type,
            sliding_window_size: self.sliding_window_size,
            sliding_window_duration: self.sliding_window_duration,
            wait_duration_in_open: self.wait_duration_in_open,
            permitted_calls_in_half_open: self.permitted_calls_in_half_open,
            failure_classifier: FnClassifier::new(classifier),
            minimum_number_of_calls: self.minimum_number_of_calls,
            slow_call_duration_threshold: self.slow_call_duration_threshold,
            slow_call_rate_threshold: self.slow_call_rate_threshold,
            failure_model: self.failure_model,
            event_listeners: self.event_listeners,
            name: self.name,
            backpressure: self.backpressure,
            manual_mode: self.manual_mode,
        }
    }

    /// Sets a custom failure classifier instance.
    ///
    /// Unlike [`failure_classifier`](Self::failure_classifier), which wraps a
    /// closure in an [`FnClassifier`], this accepts any value that implements
    /// [`FailureClassifier`](crate::FailureClassifier). Use it for a named
    /// classifier type that carries its own configuration (error-kind
    /// allowlists, thresholds) and can be reused across breakers.
    ///
    /// No trait bound is required at the builder stage: the builder is generic
    /// over its classifier slot, and the response/error types are unknowable at
    /// configuration time. The `C: FailureClassifier<Res, Err>` bound is checked
    /// where it already lives for [`FnClassifier`], at the point the layer wraps
    /// a concrete service.
    ///
    /// # The polymorphic pattern: a blanket impl over the response type
    ///
    /// Implement [`FailureClassifier`](crate::FailureClassifier) over **all**
    /// response types, pinning only the concrete error type. One classifier
    /// value then serves every `Service<Cmd>` in a polymorphic stack, with no
    /// type erasure. This mirrors [`DefaultClassifier`](crate::DefaultClassifier),
    /// which is blanket over both `Res` and `Err`.
    ///
    /// ```rust
    /// use tower_resilience_circuitbreaker::{CircuitBreakerLayer, FailureClassifier};
    ///
    /// // A Redis error type carrying enough detail to separate infrastructure
    /// // failures from user-level ones.
    /// # #[derive(Debug)]
    /// struct RedisError {
    ///     connection: bool,
    ///     timeout: bool,
    /// }
    /// # impl RedisError {
    /// #     fn is_connection(&self) -> bool { self.connection }
    /// #     fn is_timeout(&self) -> bool { self.timeout }
    /// # }
    ///
    /// // A named classifier. The blanket impl over `Res` means one value works
    /// // for every command's response type against a `RedisError`.
    /// struct RedisFailureClassifier;
    ///
    /// impl<Res> FailureClassifier<Res, RedisError> for RedisFailureClassifier {
    ///     fn classify(&self, result: &Result<Res, RedisError>) -> bool {
    ///         // WRONGTYPE/MOVED/ASK are user-level, not infrastructure failures.
    ///         matches!(result, Err(e) if e.is_connection() || e.is_timeout())
    ///     }
    /// }
    ///
    /// let layer = CircuitBreakerLayer::builder()
    ///     .failure_classifier_type(RedisFailureClassifier)
    ///     .build()?;
    /// # Ok::<(), tower_resilience_circuitbreaker::CircuitBreakerConfigError>(())
    /// ```
    pub fn failure_classifier_type<C2>(self, classifier: C2) -> CircuitBreakerConfigBuilder<C2> {
        CircuitBreakerConfigBuilder {
            failure_rate_threshold: self.failure_rate_threshold,
            sliding_window_type: self.sliding_window_type,
            sliding_window_size: self.sliding_window_size,
            sliding_window_duration: self.sliding_window_duration,
            wait_duration_in_open: self.wait_duration_in_open,
            permitted_calls_in_half_open: self.permitted_calls_in_half_open,
            failure_classifier: classifier,
            minimum_number_of_calls: self.minimum_number_of_calls,
            slow_call_duration_threshold: self.slow_call_duration_threshold,
            slow_call_rate_threshold: self.slow_call_rate_threshold,
            failure_model: self.failure_model,
            event_listeners: self.event_listeners,
            name: self.name,
            backpressure: self.backpressure,
            manual_mode: self.manual_mode,
        }
    }

    /// Sets a response-based failure classifier.
    ///
    /// This is a convenience method for services where errors are encoded in the response
    /// rather than returned as `Err`. This is common for:
    /// - HTTP services that return error status codes as `Ok(Response)`
    /// - gRPC services that encode status in the response
    /// - MCP servers that return `JsonRpcResponse` with error fields
    /// - Any service with `Error = Infallible`
    ///
    /// The classifier receives only the response (not the full `Result`), making it
    /// simpler than [`failure_classifier`](Self::failure_classifier) for these use cases.
    ///
    /// # Example
    ///
    /// ```rust
    /// use tower_resilience_circuitbreaker::CircuitBreakerLayer;
    /// use std::convert::Infallible;
    ///
    /// # struct Response { status_code: u16, error: Option<String> }
    /// # impl Response {
    /// #     fn status(&self) -> u16 { self.status_code }
    /// #     fn is_error(&self) -> bool { self.error.is_some() }
    /// # }
    ///
    /// // Classify based on HTTP status code
    /// let layer = CircuitBreakerLayer::builder()
    ///     .classify_response(|response: &Response| response.status() >= 500)
    ///     .build()?;
    ///
    /// // Or check for error fields in the response
    /// let layer = CircuitBreakerLayer::builder()
    ///     .classify_response(|response: &Response| response.is_error())
    ///     .build()?;
    /// # Ok::<(), tower_resilience_circuitbreaker::CircuitBreakerConfigError>(())
    /// ```
    ///
    /// # Note
    ///
    /// This classifier only inspects successful responses (`Ok`). If your service
    /// can also return errors via `Err`, use [`failure_classifier`](Self::failure_classifier)
    /// instead to handle both cases.
    pub fn classify_response<F, Res>(
        self,
        classifier: F,
    ) -> CircuitBreakerConfigBuilder<
        FnClassifier<impl Fn(&Result<Res, std::convert::Infallible>) -> bool + Send + Sync>,
    >
    where
        F: Fn(&Res) -> bool + Send + Sync + 'static,
        Res: 'static,
    {
        self.failure_classifier(
            move |result: &Result<Res, std::convert::Infallible>| match result {
                Ok(response) => classifier(response),
                Err(infallible) => match *infallible {},
            },
        )
    }

    /// Registers a callback when the circuit breaker transitions between states.
    ///
    /// The circuit breaker has three states: Closed (normal operation), Open (failing),
    /// and HalfOpen (testing recovery). This callback is invoked whenever the circuit
    /// transitions from one state to another.
    ///
    /// # Callback Signature
    /// `Fn(CircuitState, CircuitState)` - Called with two parameters:
    /// - First parameter: The state the circuit is transitioning **from**
    /// - Second parameter: The state the circuit is transitioning **to**
    ///
    /// # Example
    /// ```rust,no_run
    /// use tower_resilience_circuitbreaker::{CircuitBreakerLayer, CircuitState};
    ///
    /// let layer = CircuitBreakerLayer::builder()
    ///     .on_state_transition(|from, to| {
    ///         println!("Circuit breaker: {:?} -> {:?}", from, to);
    ///         match to {
    ///             CircuitState::Open => println!("WARNING: Circuit opened - service degraded"),
    ///             CircuitState::HalfOpen => println!("Testing recovery..."),
    ///             CircuitState::Closed => println!("Circuit recovered - normal operation"),
    ///         }
    ///     })
    ///     .build()?;
    /// # Ok::<(), tower_resilience_circuitbreaker::CircuitBreakerConfigError>(())
    /// ```
    pub fn on_state_transition<F>(mut self, f: F) -> Self
    where
        F: Fn(crate::CircuitState, crate::CircuitState) + Send + Sync + 'static,
    {
        use tower_resilience_core::FnListener;
        self.event_listeners
            .add(FnListener::new(move |event: &CircuitBreakerEvent| {
                if let CircuitBreakerEvent::StateTransition {
                    from_state,
                    to_state,
                    ..
                } = event
                {
                    f(*from_state, *to_state);
                }
            }));
        self
    }

    /// Registers a callback when a call is permitted through the circuit breaker.
    ///
    /// This callback is invoked when the circuit breaker allows a request to proceed to
    /// the underlying service. Calls are permitted in the Closed and HalfOpen states,
    /// but rejected in the Open state.
    ///
    /// # Callback Signature
    /// `Fn(CircuitState)` - Called with the current state of the circuit when the call was permitted.
    /// Will typically be `CircuitState::Closed` or `CircuitState::HalfOpen`.
    ///
    /// # Example
    /// ```rust,no_run
    /// use tower_resilience_circuitbreaker::{CircuitBreakerLayer, CircuitState};
    /// use std::sync::atomic::{AtomicUsize, Ordering};
    /// use std::sync::Arc;
    ///
    /// let call_count = Arc::new(AtomicUsize::new(0));
    /// let counter = Arc::clone(&call_count);
    ///
    /// let layer = CircuitBreakerLayer::builder()
    ///     .on_call_permitted(move |state| {
    ///         let count = counter.fetch_add(1, Ordering::SeqCst);
    ///         println!("Call #{} permitted in state: {:?}", count + 1, state);
    ///     })
    ///     .build()?;
    /// # Ok::<(), tower_resilience_circuitbreaker::CircuitBreakerConfigError>(())
    /// ```
    pub fn on_call_permitted<F>(mut self, f: F) -> Self
    where
        F: Fn(crate::CircuitState) + Send + Sync + 'static,
    {
        self.event_listeners
            .add(tower_resilience_core::FnListener::new(
                move |event: &CircuitBreakerEvent| {
                    if let CircuitBreakerEvent::CallPermitted { state, .. } = event {
                        f(*state);
                    }
                },
            ));
        self
    }

    /// Registers a callback when a call is rejected by the circuit breaker.
    ///
    /// This callback is invoked when the circuit breaker rejects a request without
    /// allowing it to reach the underlying service. Calls are rejected when the circuit
    /// is in the Open state, indicating that the service is currently failing and the
    /// circuit is protecting it from additional load.
    ///
    /// # Callback Signature
    /// `Fn()` - Called with no parameters when a call is rejected.
    ///
    /// # Example
    /// ```rust,no_run
    /// use tower_resilience_circuitbreaker::CircuitBreakerLayer;
    /// use std::sync::atomic::{AtomicUsize, Ordering};
    /// use std::sync::Arc;
    ///
    /// let rejection_count = Arc::new(AtomicUsize::new(0));
    /// let counter = Arc::clone(&rejection_count);
    ///
    /// let layer = CircuitBreakerLayer::builder()
    ///     .on_call_rejected(move || {
    ///         let count = counter.fetch_add(1, Ordering::SeqCst);
    ///         println!("Call rejected - circuit is open (total: {})", count + 1);
    ///     })
    ///     .build()?;
    /// # Ok::<(), tower_resilience_circuitbreaker::CircuitBreakerConfigError>(())
    /// ```
    pub fn on_call_rejected<F>(mut self, f: F) -> Self
    where
        F: Fn() + Send + Sync + 'static,
    {
        self.event_listeners
            .add(tower_resilience_core::FnListener::new(
                move |event: &CircuitBreakerEvent| {
                    if matches!(event, CircuitBreakerEvent::CallRejected { .. }) {
                        f();
                    }
                },
            ));
        self
    }

    /// Registers a callback when a successful call is recorded.
    ///
    /// This callback is invoked when a call completes successfully (as determined by the
    /// failure classifier). Successful calls contribute to closing the circuit or keeping
    /// it closed, demonstrating that the underlying service is healthy.
    ///
    /// # Callback Signature
    /// `Fn(CircuitState)` - Called with the current state of the circuit when the success was recorded.
    ///
    /// # Example
    /// ```rust,no_run
    /// use tower_resilience_circuitbreaker::{CircuitBreakerLayer, CircuitState};
    ///
    /// let layer = CircuitBreakerLayer::builder()
    ///     .on_success(|state| {
    ///         match state {
    ///             CircuitState::HalfOpen => println!("Success in half-open - may recover soon"),
    ///             CircuitState::Closed => println!("Success - circuit healthy"),
    ///             _ => {}
    ///         }
    ///     })
    ///     .build()?;
    /// # Ok::<(), tower_resilience_circuitbreaker::CircuitBreakerConfigError>(())
    /// ```
    pub fn on_success<F>(mut self, f: F) -> Self
    where
        F: Fn(crate::CircuitState) + Send + Sync + 'static,
    {
        self.event_listeners
            .add(tower_resilience_core::FnListener::new(
                move |event: &CircuitBreakerEvent| {
                    if let CircuitBreakerEvent::SuccessRecorded { state, .. } = event {
                        f(*state);
                    }
                },
            ));
        self
    }

    /// Registers a callback when a failed call is recorded.
    ///
    /// This callback is invoked when a call fails (as determined by the failure classifier).
    /// Failed calls contribute to opening the circuit when the failure rate exceeds the
    /// configured threshold, protecting the underlying service from additional load.
    ///
    /// # Callback Signature
    /// `Fn(CircuitState)` - Called with the current state of the circuit when the failure was recorded.
    ///
    /// # Example
    /// ```rust,no_run
    /// use tower_resilience_circuitbreaker::{CircuitBreakerLayer, CircuitState};
    /// use std::sync::atomic::{AtomicUsize, Ordering};
    /// use std::sync::Arc;
    ///
    /// let failure_count = Arc::new(AtomicUsize::new(0));
    /// let counter = Arc::clone(&failure_count);
    ///
    /// let layer = CircuitBreakerLayer::builder()
    ///     .on_failure(move |state| {
    ///         let count = counter.fetch_add(1, Ordering::SeqCst);
    ///         println!("Failure #{} recorded in state: {:?}", count + 1, state);
    ///         if matches!(state, CircuitState::HalfOpen) {
    ///             println!("Warning: failure during recovery attempt");
    ///         }
    ///     })
    ///     .build()?;
    /// # Ok::<(), tower_resilience_circuitbreaker::CircuitBreakerConfigError>(())
    /// ```
    pub fn on_failure<F>(mut self, f: F) -> Self
    where
        F: Fn(crate::CircuitState) + Send + Sync + 'static,
    {
        self.event_listeners
            .add(tower_resilience_core::FnListener::new(
                move |event: &CircuitBreakerEvent| {
                    if let CircuitBreakerEvent::FailureRecorded { state, .. } = event {
                        f(*state);
                    }
                },
            ));
        self
    }

    /// Registers a callback when a slow call is detected.
    ///
    /// This callback is invoked when a call takes longer than the configured
    /// `slow_call_duration_threshold`. Slow calls are tracked separately from failures,
    /// and if the slow call rate exceeds `slow_call_rate_threshold`, the circuit will open
    /// even if the failure rate is acceptable. This protects against performance degradation.
    ///
    /// Note: This callback is only invoked when `slow_call_duration_threshold` is configured.
    ///
    /// # Callback Signature
    /// `Fn(Duration)` - Called with the actual duration the slow call took to complete.
    ///
    /// # Example
    /// ```rust,no_run
    /// use tower_resilience_circuitbreaker::CircuitBreakerLayer;
    /// use std::time::Duration;
    ///
    /// let layer = CircuitBreakerLayer::builder()
    ///     .slow_call_duration_threshold(Duration::from_secs(2))
    ///     .slow_call_rate_threshold(0.5) // Open if >50% of calls are slow
    ///     .on_slow_call(|duration| {
    ///         println!("Slow call detected: {:?}", duration);
    ///         if duration > Duration::from_secs(10) {
    ///             println!("WARNING: Extremely slow call!");
    ///         }
    ///     })
    ///     .build()?;
    /// # Ok::<(), tower_resilience_circuitbreaker::CircuitBreakerConfigError>(())
    /// ```
    pub fn on_slow_call<F>(mut self, f: F) -> Self
    where
        F: Fn(Duration) + Send + Sync + 'static,
    {
        use tower_resilience_core::FnListener;
        self.event_listeners
            .add(FnListener::new(move |event: &CircuitBreakerEvent| {
                if let CircuitBreakerEvent::SlowCallDetected { duration, .. } = event {
                    f(*duration);
                }
            }));
        self
    }

    /// Builds the configuration and returns a CircuitBreakerLayer.
    ///
    /// # Errors
    ///
    /// Returns [`CircuitBreakerConfigError`] if the configuration is invalid:
    /// - `sliding_window_type` is `TimeBased` without a `sliding_window_duration`
    /// - `failure_model` is `ConsecutiveFailures { k: 0 }`
    /// - `failure_rate_threshold` is not finite or not in `(0.0, 1.0]`
    /// - `slow_call_rate_threshold` is not finite or not in `(0.0, 1.0]`
    /// - `sliding_window_size` is zero
    pub fn build(self) -> Result<crate::layer::CircuitBreakerLayer<C>, CircuitBreakerConfigError> {
        let config = self.into_config()?;
        Ok(crate::layer::CircuitBreakerLayer::new(config))
    }

    /// Builds the configuration, returning both a layer and an observable handle.
    ///
    /// All services produced by the returned layer share the same circuit state,
    /// and the handle can observe that state from outside the service.
    ///
    /// # Errors
    ///
    /// Returns [`CircuitBreakerConfigError`] under the same conditions as
    /// [`build`](Self::build).
    ///
    /// # Example
    ///
    /// ```rust
    /// use tower_resilience_circuitbreaker::CircuitBreakerLayer;
    ///
    /// let (layer, handle) = CircuitBreakerLayer::builder()
    ///     .failure_rate_threshold(0.5)
    ///     .build_with_handle()
    ///     .unwrap();
    ///
    /// // Apply the layer normally...
    ///
    /// // Query state from the handle:
    /// assert_eq!(handle.health_status(), "healthy");
    /// ```
    pub fn build_with_handle(
        self,
    ) -> Result<
        (
            crate::layer::CircuitBreakerLayer<C>,
            CircuitBreakerHandle<C>,
        ),
        CircuitBreakerConfigError,
    > {
        let config = Arc::new(self.into_config()?);
        let state_atomic = Arc::new(AtomicU8::new(CircuitState::Closed as u8));
        let circuit = Arc::new(Mutex::new(Circuit::new_with_atomic(Arc::clone(
            &state_atomic,
        ))));

        let shared = SharedCircuit {
            circuit: Arc::clone(&circuit),
            state_atomic: Arc::clone(&state_atomic),
        };

        let handle = CircuitBreakerHandle {
            circuit,
            state_atomic,
            config: Arc::clone(&config),
        };

        let layer = crate::layer::CircuitBreakerLayer::new_with_shared(config, shared);

        Ok((layer, handle))
    }

    fn into_config(self) -> Result<CircuitBreakerConfig<C>, CircuitBreakerConfigError> {
        // Validate time-based window configuration
        if self.sliding_window_type == SlidingWindowType::TimeBased
            && self.sliding_window_duration.is_none()
        {
            return Err(CircuitBreakerConfigError::MissingSlidingWindowDuration);
        }

        // Validate failure model configuration
        if let FailureModel::ConsecutiveFailures { k } = self.failure_model {
            if k == 0 {
                return Err(CircuitBreakerConfigError::ZeroConsecutiveFailures);
            }
        }

        let rate_valid = |rate: f64| rate.is_finite() && rate > 0.0 && rate <= 1.0;

        if !rate_valid(self.failure_rate_threshold) {
            return Err(CircuitBreakerConfigError::InvalidFailureRateThreshold(
                self.failure_rate_threshold,
            ));
        }

        if !rate_valid(self.slow_call_rate_threshold) {
            return Err(CircuitBreakerConfigError::InvalidSlowCallRateThreshold(
                self.slow_call_rate_threshold,
            ));
        }

        if self.sliding_window_size == 0 {
            return Err(CircuitBreakerConfigError::ZeroSlidingWindowSize);
        }

        Ok(CircuitBreakerConfig {
            failure_rate_threshold: self.failure_rate_threshold,
            sliding_window_type: self.sliding_window_type,
            sliding_window_size: self.sliding_window_size,
            sliding_window_duration: self.sliding_window_duration,
            wait_duration_in_open: self.wait_duration_in_open,
            permitted_calls_in_half_open: self.permitted_calls_in_half_open,
            failure_classifier: self.failure_classifier,
            minimum_number_of_calls: self
                .minimum_number_of_calls
                .unwrap_or(self.sliding_window_size),
            slow_call_duration_threshold: self.slow_call_duration_threshold,
            slow_call_rate_threshold: self.slow_call_rate_threshold,
            failure_model: self.failure_model,
            event_listeners: self.event_listeners,
            name: self.name,
            backpressure: self.backpressure,
            manual_mode: self.manual_mode,
        })
    }
}

/// Errors that can occur when validating a [`CircuitBreakerConfig`] at
/// construction time.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum CircuitBreakerConfigError {
    /// `sliding_window_type` was set to `TimeBased` but no
    /// `sliding_window_duration` was configured.
    #[error("sliding_window_duration must be set when using TimeBased sliding window")]
    MissingSlidingWindowDuration,
    /// `failure_model` was set to `ConsecutiveFailures { k: 0 }`, which could
    /// never trip.
    #[error("consecutive_failures requires k > 0, got 0")]
    ZeroConsecutiveFailures,
    /// `failure_rate_threshold` is not finite, or not in the range `(0.0, 1.0]`.
    #[error("failure_rate_threshold ({0}) must be finite and in the range (0.0, 1.0]")]
    InvalidFailureRateThreshold(f64),
    /// `slow_call_rate_threshold` is not finite, or not in the range `(0.0, 1.0]`.
    #[error("slow_call_rate_threshold ({0}) must be finite and in the range (0.0, 1.0]")]
    InvalidSlowCallRateThreshold(f64),
    /// `sliding_window_size` is zero, which can never accumulate any calls.
    #[error("sliding_window_size must be greater than zero")]
    ZeroSlidingWindowSize,
}

#[cfg(test)]
mod config_error_tests {
    use super::*;

    #[test]
    fn zero_sliding_window_size_is_rejected() {
        let result = CircuitBreakerConfigBuilder::<DefaultClassifier>::new()
            .sliding_window_size(0)
            .build();
        assert_eq!(
            result.err().unwrap(),
            CircuitBreakerConfigError::ZeroSlidingWindowSize
        );
    }

    #[test]
    fn smallest_valid_sliding_window_size_is_accepted() {
        let result = CircuitBreakerConfigBuilder::<DefaultClassifier>::new()
            .sliding_window_size(1)
            .build();
        assert!(result.is_ok());
    }

    /// Table-driven: every non-finite or out-of-range failure rate threshold
    /// must be rejected with the same typed error, regardless of shape.
    #[test]
    fn invalid_failure_rate_thresholds_are_rejected() {
        for rate in [
            f64::NAN,
            f64::INFINITY,
            f64::NEG_INFINITY,
            -1.0,
            0.0,
            1.000001,
            2.0,
        ] {
            let result = CircuitBreakerConfigBuilder::<DefaultClassifier>::new()
                .failure_rate_threshold(rate)
                .build();
            assert!(
                matches!(
                    result,
                    Err(CircuitBreakerConfigError::InvalidFailureRateThreshold(_))
                ),
                "failure_rate_threshold {rate} should be rejected"
            );
        }
    }

    /// Table-driven: the boundary and smallest-above-zero failure rate
    /// thresholds must be accepted.
    #[test]
    fn valid_failure_rate_thresholds_are_accepted() {
        for rate in [f64::MIN_POSITIVE, 0.0001, 0.5, 1.0] {
            let result = CircuitBreakerConfigBuilder::<DefaultClassifier>::new()
                .failure_rate_threshold(rate)
                .build();
            assert!(
                result.is_ok(),
                "failure_rate_threshold {rate} should be accepted"
            );
        }
    }

    /// Table-driven: every non-finite or out-of-range slow-call rate
    /// threshold must be rejected with the same typed error.
    #[test]
    fn invalid_slow_call_rate_thresholds_are_rejected() {
        for rate in [
            f64::NAN,
            f64::INFINITY,
            f64::NEG_INFINITY,
            -1.0,
            0.0,
            1.000001,
            2.0,
        ] {
            let result = CircuitBreakerConfigBuilder::<DefaultClassifier>::new()
                .slow_call_rate_threshold(rate)
                .build();
            assert!(
                matches!(
                    result,
                    Err(CircuitBreakerConfigError::InvalidSlowCallRateThreshold(_))
                ),
                "slow_call_rate_threshold {rate} should be rejected"
            );
        }
    }

    #[test]
    fn time_based_without_duration_is_rejected() {
        let result = CircuitBreakerConfigBuilder::<DefaultClassifier>::new()
            .sliding_window_type(SlidingWindowType::TimeBased)
            .build();
        assert_eq!(
            result.err().unwrap(),
            CircuitBreakerConfigError::MissingSlidingWindowDuration
        );
    }

    #[test]
    fn zero_consecutive_failures_is_rejected() {
        let result = CircuitBreakerConfigBuilder::<DefaultClassifier>::new()
            .consecutive_failures(0)
            .build();
        assert_eq!(
            result.err().unwrap(),
            CircuitBreakerConfigError::ZeroConsecutiveFailures
        );
    }

    #[test]
    fn valid_config_builds_successfully() {
        let result = CircuitBreakerConfigBuilder::<DefaultClassifier>::new()
            .failure_rate_threshold(0.5)
            .sliding_window_size(100)
            .consecutive_failures(1)
            .build();
        assert!(result.is_ok());
    }
}
