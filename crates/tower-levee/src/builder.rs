//! Levee's layers as named steps of a [`tower::ServiceBuilder`], as
//! tower-http's `ServiceBuilderExt` does for its own: the stack reads in
//! the order the [crate docs](crate) give, outermost first.
//!
//! ```
//! use std::time::Duration;
//! use http::{Request, Response};
//! use tower::{ServiceBuilder, ServiceExt};
//! use tower_levee::{BreakerLayer, BulkheadLayer, RetryBudgetLayer, ServiceBuilderExt};
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), tower_levee::BoxError> {
//! let provider = tower::service_fn(|_req: Request<String>| async {
//!     Ok::<_, tower_levee::BoxError>(Response::new(String::new()))
//! });
//! let client = ServiceBuilder::new()
//!     .retry_budget(RetryBudgetLayer::with_defaults())
//!     .bulkhead(BulkheadLayer::named("llm", 64))
//!     .breaker(BreakerLayer::new())
//!     .timeout(Duration::from_secs(60))
//!     .service(provider);
//! let req = Request::post("https://api.openai.com/v1/chat/completions").body(String::new())?;
//! assert!(client.oneshot(req).await?.status().is_success());
//! # Ok(())
//! # }
//! ```

use tower::ServiceBuilder;
use tower_layer::Stack;

use crate::breaker::BreakerLayer;
use crate::bulkhead::BulkheadLayer;
use crate::retry::RetryBudgetLayer;

/// Levee's layers as methods of [`ServiceBuilder`]. Each is `.layer(l)`
/// under a name that says what it adds.
pub trait ServiceBuilderExt<L>: sealed::Sealed + Sized {
    /// Adds a [`RetryBudgetLayer`]: the one place that retries.
    fn retry_budget<C>(
        self,
        layer: RetryBudgetLayer<C>,
    ) -> ServiceBuilder<Stack<RetryBudgetLayer<C>, L>>;

    /// Adds a [`BulkheadLayer`]: fail fast past the dependency's limit.
    fn bulkhead(self, layer: BulkheadLayer) -> ServiceBuilder<Stack<BulkheadLayer, L>>;

    /// Adds a [`BreakerLayer`]: breaker, throttle gate and park table.
    fn breaker<C>(self, layer: BreakerLayer<C>) -> ServiceBuilder<Stack<BreakerLayer<C>, L>>;
}

impl<L> ServiceBuilderExt<L> for ServiceBuilder<L> {
    fn retry_budget<C>(
        self,
        layer: RetryBudgetLayer<C>,
    ) -> ServiceBuilder<Stack<RetryBudgetLayer<C>, L>> {
        self.layer(layer)
    }

    fn bulkhead(self, layer: BulkheadLayer) -> ServiceBuilder<Stack<BulkheadLayer, L>> {
        self.layer(layer)
    }

    fn breaker<C>(self, layer: BreakerLayer<C>) -> ServiceBuilder<Stack<BreakerLayer<C>, L>> {
        self.layer(layer)
    }
}

mod sealed {
    pub trait Sealed {}
    impl<L> Sealed for tower::ServiceBuilder<L> {}
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Compiles only if both stacks are the same type.
    fn same_type<T>(_: T, _: T) {}

    #[test]
    fn each_method_stacks_its_layer_where_layer_would() {
        let inner = tower::service_fn(|_: http::Request<String>| async {
            Ok::<_, crate::BoxError>(http::Response::new(String::new()))
        });
        same_type(
            ServiceBuilder::new()
                .retry_budget(RetryBudgetLayer::with_defaults())
                .bulkhead(BulkheadLayer::new(8))
                .breaker(BreakerLayer::new())
                .service(inner),
            ServiceBuilder::new()
                .layer(RetryBudgetLayer::with_defaults())
                .layer(BulkheadLayer::new(8))
                .layer(BreakerLayer::new())
                .service(inner),
        );
    }
}
