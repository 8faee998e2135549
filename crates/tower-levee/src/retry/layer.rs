//! [`RetryBudgetLayer`]: configuration of the retry layer.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use levee_core::classify::{Classify, ProviderClassifier};
use levee_core::config_error::ConfigError;
use tower_layer::Layer;

use super::budget::RetryBudget;
use super::decide::Shared;
use super::policy::{Policy, policy_setters};
use super::service::Retry;

/// Applies [`Retry`]: the one layer that retries, within a [`RetryBudget`].
///
/// Defaults: 3 attempts in all; waits from the provider's hint, else
/// exponential backoff from 500 ms capped at 8 s with full jitter; no hint
/// longer than 60 s is waited out; no overall deadline. See the
/// [module docs](super) for when a request is retried.
///
/// Waits are `tokio::time` sleeps inside the response future (so
/// `tokio::time::pause()` drives them): a retry that waits needs a Tokio
/// runtime with time enabled.
///
/// Services built by one layer share its budget; build two layers over one
/// `Arc<RetryBudget>` to share a budget between dependencies, or give each
/// its own.
#[derive(Clone)]
pub struct RetryBudgetLayer<C = ProviderClassifier> {
    budget: Arc<RetryBudget>,
    classifier: C,
    policy: Policy,
    seed: Option<u64>,
}

impl RetryBudgetLayer {
    /// A layer drawing retries from `budget`, classifying responses that
    /// carry no [`Classification`](levee_core::classify::Classification)
    /// extension with the [`ProviderClassifier`].
    pub fn new(budget: Arc<RetryBudget>) -> Self {
        RetryBudgetLayer {
            budget,
            classifier: ProviderClassifier::default(),
            policy: Policy::default(),
            seed: None,
        }
    }

    /// A layer with its own default budget (`ttl` 10 s, 10 retries per
    /// second, 10% of requests).
    pub fn with_defaults() -> Self {
        Self::new(Arc::new(RetryBudget::default()))
    }

    /// A builder drawing retries from `budget`, whose [`build`](RetryBudgetLayerBuilder::build)
    /// checks every setting and names the first invalid one (the same
    /// error a configuration file gets).
    ///
    /// ```
    /// use tower_levee::retry::RetryBudgetLayer;
    /// use tower_levee::retry::RetryBudget;
    ///
    /// let budget = std::sync::Arc::new(RetryBudget::default());
    /// let err = RetryBudgetLayer::builder(budget.clone()).max_attempts(0).build().unwrap_err();
    /// assert_eq!(err.field, "retry.max_attempts");
    /// let layer = RetryBudgetLayer::builder(budget).max_attempts(2).build().unwrap();
    /// # let _ = layer;
    /// ```
    pub fn builder(budget: Arc<RetryBudget>) -> RetryBudgetLayerBuilder {
        RetryBudgetLayerBuilder {
            layer: RetryBudgetLayer::new(budget),
        }
    }
}

/// Builds a [`RetryBudgetLayer`], checking every setting at
/// [`build`](Self::build). See [`RetryBudgetLayer::builder`].
pub struct RetryBudgetLayerBuilder<C = ProviderClassifier> {
    layer: RetryBudgetLayer<C>,
}

impl<C> RetryBudgetLayerBuilder<C> {
    policy_setters!(layer.policy);

    /// The caller's overall deadline, measured from `call`: no retry starts
    /// if its wait would end after it. A [`Deadline`](super::Deadline)
    /// request extension, when earlier, wins. The layer does not cancel an
    /// attempt in flight; put a `tower::timeout` outside it for that. Above
    /// zero.
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.layer.policy.timeout = Some(timeout);
        self
    }

    /// Seeds the backoff jitter (for reproducible tests). Unseeded, each
    /// service gets a random seed.
    pub fn seed(mut self, seed: u64) -> Self {
        self.layer.seed = Some(seed);
        self
    }

    /// Classifies responses that carry no `Classification` extension (and
    /// transport errors) with `classifier`.
    pub fn classifier<C2>(self, classifier: C2) -> RetryBudgetLayerBuilder<C2> {
        RetryBudgetLayerBuilder {
            layer: self.layer.with_classifier(classifier),
        }
    }

    /// The builder with these knobs (checked by `build`).
    #[cfg(feature = "serde")]
    pub(crate) fn with_policy(mut self, policy: Policy) -> Self {
        self.layer.policy = policy;
        self
    }

    /// Checks every setting and builds the layer.
    pub fn build(self) -> Result<RetryBudgetLayer<C>, ConfigError> {
        self.layer.policy.validate()?;
        Ok(self.layer)
    }
}

impl<C> fmt::Debug for RetryBudgetLayerBuilder<C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("RetryBudgetLayerBuilder")
            .field(&self.layer)
            .finish()
    }
}

impl<C> RetryBudgetLayer<C> {
    fn with_classifier<C2>(self, classifier: C2) -> RetryBudgetLayer<C2> {
        RetryBudgetLayer {
            budget: self.budget,
            classifier,
            policy: self.policy,
            seed: self.seed,
        }
    }

    /// The budget retries are drawn from.
    pub fn budget(&self) -> &Arc<RetryBudget> {
        &self.budget
    }
}

impl<S: Clone, C: Classify + Clone> Layer<S> for RetryBudgetLayer<C> {
    type Service = Retry<S, C>;

    fn layer(&self, inner: S) -> Self::Service {
        let rng = self
            .seed
            .map_or_else(fastrand::Rng::new, fastrand::Rng::with_seed);
        let shared = Shared::new(
            self.budget.clone(),
            self.classifier.clone(),
            self.policy,
            rng,
        );
        Retry::from_shared(inner, shared)
    }
}

impl<C> fmt::Debug for RetryBudgetLayer<C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RetryBudgetLayer")
            .field("budget", &self.budget)
            .field("policy", &self.policy)
            .field("seed", &self.seed)
            .finish_non_exhaustive()
    }
}
