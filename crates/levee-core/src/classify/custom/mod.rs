//! Rules a user adds, checked before the built-in ones: see [`Rules`].

mod pointer;
#[cfg(feature = "serde")]
mod spec;

use std::time::Duration;

use aho_corasick::{AhoCorasick, MatchKind};
use http::{HeaderMap, HeaderName};

use self::pointer::{Found, Tree};
use super::body::ErrorFacts;
use super::hints;
use super::rules::token;
use super::text::lowercase;
use super::verdict::{Classification, Reason, Verdict};
use crate::config_error::ConfigError;

/// Rules a user adds, checked before the built-in ones.
///
/// Providers change their error answers faster than a library can follow,
/// and every OpenAI-compatible host invents its own. A set of `Rules` teaches
/// the classifier a provider without writing a [`Classify`](crate::classify::Classify)
/// implementation: each [`Rule`] matches an answer by what it says (its
/// status, a code, a phrase in its message in any language, a JSON field, a
/// header) and decides its verdict, its wait and its reason. Rules are
/// checked in order, before the built-in ones; the first that matches
/// decides, and an answer no rule matches is classified as without them.
///
/// Within a rule every condition given must hold; a condition given a list
/// holds when any item does.
///
/// | condition | matches when |
/// |---|---|
/// | `status` | the HTTP status is one of them: `429`, `"4xx"`, `"400-403"` |
/// | `code` | one of the answer's codes (`error.code`, `error.type`, Google's `status` and `ErrorInfo.reason`, Anthropic's `error.details.error_code`, AWS's `__type`, a numeric code) equals it, ignoring ASCII case |
/// | `phrase` | its message (and an upstream provider's copy of one) contains it, ignoring case in any script |
/// | `field` | the value at a JSON pointer ([RFC 6901](https://www.rfc-editor.org/rfc/rfc6901)) is present, equals one of some values, or contains a phrase |
/// | `header` | a header is present, or its value equals or contains a text |
///
/// A rule without `status` matches error answers only: a non-2xx response,
/// or an error found inside a 2xx body or stream. A rule whose `status`
/// names a success (`200`) also has the layers read 2xx bodies, which they
/// otherwise read only with
/// [`peek_success`](crate::classify::ProviderClassifierBuilder::peek_success):
/// for the providers that answer `200` with an error object (Baidu's
/// `error_code`, MiniMax's `base_resp`). That read is bounded by the
/// layer's peek and costs the success path, so only such a rule turns it
/// on, and it must name what tells the error apart (a code, a phrase, a
/// header, a field). An error inside a stream is matched without the
/// response's headers (a `header` condition does not hold there).
///
/// What a rule decides: the [`Verdict`]; the wait, either fixed or read
/// from a field (a number of seconds, or of milliseconds with `unit =
/// "ms"`, or a duration such as `"1m20s"`), and when it gives none, the
/// wait the built-in readers find (`Retry-After`, the message's "try again
/// in 20s"); and the reason the events and metrics carry, the rule's name
/// unless it gives one.
///
/// # A rules file
///
/// With the `serde` feature, rules are read from TOML (or any serde format;
/// `tower_levee::config::from_toml` names the key, line and column of a
/// mistake):
///
/// ```toml
/// [[rule]]
/// name = "acme-balance"              # names the rule; the reason by default
/// status = [402, 403]
/// phrase = ["余额不足", "insufficient balance"]
/// verdict = "quota"
///
/// [[rule]]
/// name = "acme-model-loading"
/// status = 503
/// field = { pointer = "/estimated_time", present = true }
/// verdict = "throttled"
/// wait = { pointer = "/estimated_time" }   # seconds, fractional included
/// reason = "acme:model_loading"
/// ```
///
/// # In code
///
/// ```
/// use http::{HeaderMap, StatusCode};
/// use levee_core::classify::{Classify, ProviderClassifier, ResponseView, Rule, Rules, Verdict};
///
/// let rules = Rules::new([
///     Rule::builder("acme-balance", Verdict::Quota)
///         .status(403)
///         .phrase("余额不足")
///         .reason("acme:balance")
///         .build()?,
/// ])?;
/// let classifier = ProviderClassifier::builder().rules(rules).build();
///
/// let body = r#"{"error":{"message":"账户余额不足，请充值","type":"api_error"}}"#;
/// let headers = HeaderMap::new();
/// let c = classifier.classify_response(&ResponseView::new(
///     StatusCode::FORBIDDEN,
///     &headers,
///     body.as_bytes(),
/// ));
/// assert_eq!(c.verdict, Verdict::Quota);
/// assert_eq!(c.reason.as_str(), "acme:balance");
/// # Ok::<(), levee_core::config_error::ConfigError>(())
/// ```
///
#[derive(Clone, Debug, Default)]
pub struct Rules {
    rules: Vec<Rule>,
    /// Every rule's pointers, read in one pass.
    tree: Tree,
    pointers: usize,
    /// Every rule's phrases, found in one pass; a rule's `phrase_ids` are
    /// its patterns' ids.
    phrases: Option<AhoCorasick>,
    phrase_count: usize,
    /// Every header a rule reads, once; a header test's `slot` is its place.
    header_names: Vec<HeaderName>,
}

impl PartialEq for Rules {
    fn eq(&self, other: &Self) -> bool {
        // The automaton and the tree follow from the rules.
        self.rules == other.rules
    }
}

impl Eq for Rules {}

impl Rules {
    /// The most rules a set holds.
    pub const MAX_RULES: usize = 10_000;

    /// A set of `rules`, checked in order. Fails when two share a name, or
    /// past [`MAX_RULES`](Self::MAX_RULES).
    pub fn new(rules: impl IntoIterator<Item = Rule>) -> Result<Rules, ConfigError> {
        let mut set = Rules::default();
        for mut rule in rules {
            if set.rules.len() == Rules::MAX_RULES {
                return Err(ConfigError::new(
                    "rule",
                    format!(
                        "at most {} rules, checked one by one on every error",
                        Rules::MAX_RULES
                    ),
                ));
            }
            if set.rules.iter().any(|r| r.name == rule.name) {
                return Err(ConfigError::new(
                    "rule.name",
                    format!(
                        "two rules are named {:?}: a name says which rule decided, so each must be unique",
                        rule.name
                    ),
                ));
            }
            for (tokens, slot) in rule.pointer_slots() {
                *slot = set.pointers;
                set.tree.insert(tokens, set.pointers);
                set.pointers += 1;
            }
            for test in &mut rule.headers {
                test.slot = match set.header_names.iter().position(|n| *n == test.name) {
                    Some(slot) => slot,
                    None => {
                        set.header_names.push(test.name.clone());
                        set.header_names.len() - 1
                    }
                };
            }
            rule.phrase_ids = (set.phrase_count..set.phrase_count + rule.phrases.len()).collect();
            set.phrase_count += rule.phrases.len();
            set.rules.push(rule);
        }
        if set.phrase_count > 0 {
            let patterns = set
                .rules
                .iter()
                .flat_map(|r| r.phrases.iter().map(|p| p.as_bytes()));
            let automaton = AhoCorasick::builder()
                .match_kind(MatchKind::Standard)
                .build(patterns)
                .map_err(|e| {
                    ConfigError::new(
                        "rule.phrase",
                        format!("the phrases do not build a matcher: {e}"),
                    )
                })?;
            set.phrases = Some(automaton);
        }
        Ok(set)
    }

    /// The values of the headers the rules read, by slot: one walk over
    /// the answer's headers, however many rules read them.
    fn header_values<'h>(&self, headers: Option<&'h HeaderMap>) -> Vec<Vec<&'h [u8]>> {
        let mut values = vec![Vec::new(); self.header_names.len()];
        for (name, value) in headers.into_iter().flatten() {
            if let Some(slot) = self.header_names.iter().position(|n| n == name) {
                values[slot].push(value.as_bytes());
            }
        }
        values
    }

    /// Which phrases of the set `lower` contains, by pattern id.
    fn phrases_in(&self, lower: &str) -> Vec<bool> {
        let mut present = vec![false; self.phrase_count];
        if let Some(automaton) = &self.phrases {
            for m in automaton.find_overlapping_iter(lower.as_bytes()) {
                present[m.pattern().as_usize()] = true;
            }
        }
        present
    }

    /// The rules, in order.
    pub fn iter(&self) -> impl ExactSizeIterator<Item = &Rule> {
        self.rules.iter()
    }

    /// How many rules there are.
    pub fn len(&self) -> usize {
        self.rules.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.rules.is_empty()
    }

    /// The rule at `index` ([`Classification::rule`]).
    pub fn get(&self, index: u16) -> Option<&Rule> {
        self.rules.get(usize::from(index))
    }

    /// Whether some rule reads the bodies of answers with this 2xx status.
    pub(crate) fn reads_success(&self, status: u16) -> bool {
        self.rules
            .iter()
            .any(|r| r.status.as_ref().is_some_and(|s| s.contains(status)))
    }

    /// The classification of the first rule that matches `answer`: its
    /// wait, else `hint`'s, each passed through `finish` (rounding, cap).
    pub(crate) fn classify(
        &self,
        answer: &Answer<'_>,
        hint: impl FnOnce() -> Option<Duration>,
        finish: impl Fn(Duration) -> Duration,
    ) -> Option<Classification> {
        let (index, rule, wait) = self.first_match(answer)?;
        // A request waiting cannot help keeps no wait, as the built-in rules'.
        let wait = wait
            .or_else(hint)
            .filter(|_| rule.verdict != Verdict::Request);
        Some(Classification {
            verdict: rule.verdict,
            wait: wait.map(finish),
            should_retry: None,
            reason: rule.reason.clone(),
            rule: u16::try_from(index).ok(),
            stated_limit: None,
        })
    }

    /// The first rule that matches `answer`, its position, and its wait if
    /// it reads one.
    fn first_match(&self, answer: &Answer<'_>) -> Option<(usize, &Rule, Option<Duration>)> {
        // Read the fields and find the phrases once, on the first rule
        // that needs them.
        let mut found: Option<Vec<Found>> = None;
        let mut phrases: Option<Vec<bool>> = None;
        let mut headers: Option<Vec<Vec<&[u8]>>> = None;
        for (index, rule) in self.rules.iter().enumerate() {
            if !rule.matches_cheaply(answer) {
                continue;
            }
            if !rule.headers.is_empty() {
                let values = headers.get_or_insert_with(|| self.header_values(answer.seen.headers));
                if !rule.headers.iter().all(|h| h.holds(&values[h.slot])) {
                    continue;
                }
            }
            if !rule.phrase_ids.is_empty() {
                let present = phrases.get_or_insert_with(|| self.phrases_in(answer.lower));
                if !rule.phrase_ids.iter().any(|&id| present[id]) {
                    continue;
                }
            }
            let needs_fields =
                !rule.fields.is_empty() || matches!(rule.wait, Some(Wait::Field { .. }));
            let fields: &[Found] = if needs_fields {
                found.get_or_insert_with(|| self.tree.read(answer.seen.body, self.pointers))
            } else {
                &[]
            };
            if !rule.fields.iter().all(|f| f.test.holds(&fields[f.slot])) {
                continue;
            }
            let wait = match &rule.wait {
                None => None,
                Some(Wait::Fixed(d)) => Some(*d),
                Some(Wait::Field { slot, unit, .. }) => unit.read(&fields[*slot]),
            };
            return Some((index, rule, wait));
        }
        None
    }
}

/// What a rule sees of an answer.
pub(crate) struct Answer<'a> {
    pub(crate) seen: Seen<'a>,
    pub(crate) facts: &'a ErrorFacts<'a>,
    /// The message and an upstream copy, lowercased (any script).
    pub(crate) lower: &'a str,
}

/// What the user's rules read of an answer besides its facts.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Seen<'a> {
    /// The HTTP status (a stream's own, `200`, for an error inside it).
    pub(crate) status: u16,
    /// Whether the answer is an error (a rule without a status matches
    /// errors only).
    pub(crate) error: bool,
    pub(crate) headers: Option<&'a HeaderMap>,
    /// The body, or the stream event, the facts were read from.
    pub(crate) body: &'a [u8],
    /// The AWS error type the response's head or frame names (the body's
    /// `__type` is in the facts).
    pub(crate) aws: Option<&'a str>,
}

/// One rule: when it matches, and what it decides. Built with
/// [`Rule::builder`] or read from a file (feature `serde`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Rule {
    name: Box<str>,
    status: Option<Statuses>,
    codes: Vec<Code>,
    /// Lowercased; found by the set's automaton.
    phrases: Vec<Box<str>>,
    /// The phrases' ids in the set's automaton.
    phrase_ids: Vec<usize>,
    fields: Vec<Field>,
    headers: Vec<HeaderTest>,
    verdict: Verdict,
    wait: Option<Wait>,
    reason: Reason,
}

impl Rule {
    /// The longest name or reason a rule may carry, in bytes: it is a label
    /// on events and metrics.
    pub const MAX_LABEL: usize = 64;

    /// A rule named `name` (the reason too, unless
    /// [`reason`](RuleBuilder::reason) says otherwise) that decides `verdict`.
    pub fn builder(name: &str, verdict: Verdict) -> RuleBuilder {
        RuleBuilder {
            name: name.to_owned(),
            verdict,
            status: None,
            codes: Vec::new(),
            phrases: Vec::new(),
            fields: Vec::new(),
            headers: Vec::new(),
            wait: None,
            reason: None,
            error: None,
        }
    }

    /// Its name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The verdict it decides.
    pub fn verdict(&self) -> Verdict {
        self.verdict
    }

    /// The reason it gives.
    pub fn reason(&self) -> &Reason {
        &self.reason
    }

    fn pointer_slots(&mut self) -> impl Iterator<Item = (&[String], &mut usize)> {
        let fields = self
            .fields
            .iter_mut()
            .map(|f| (f.tokens.as_slice(), &mut f.slot));
        let wait = self.wait.iter_mut().filter_map(|w| match w {
            Wait::Field { tokens, slot, .. } => Some((tokens.as_slice(), slot)),
            Wait::Fixed(_) => None,
        });
        fields.chain(wait)
    }

    /// The status and the codes: what costs no search.
    fn matches_cheaply(&self, a: &Answer<'_>) -> bool {
        match &self.status {
            Some(s) if !s.contains(a.seen.status) => return false,
            None if !a.seen.error => return false,
            _ => {}
        }
        self.codes.is_empty()
            || self
                .codes
                .iter()
                .any(|c| c.is_in(a.facts, a.seen.aws.or(a.facts.aws_type)))
    }
}

/// A code a rule names, and its number when it is one (`1113`).
#[derive(Clone, Debug, PartialEq, Eq)]
struct Code {
    text: Box<str>,
    number: Option<u64>,
}

impl Code {
    /// Whether any of the answer's codes is this one, ignoring ASCII case.
    fn is_in(&self, facts: &ErrorFacts<'_>, aws: Option<&str>) -> bool {
        let code = &*self.text;
        facts.codes().any(|c| c.eq_ignore_ascii_case(code))
            || aws.is_some_and(|t| {
                t.eq_ignore_ascii_case(code) || token(t).eq_ignore_ascii_case(code)
            })
            || self.number.is_some_and(|n| {
                facts.code_number == Some(n) || facts.number.is_some_and(|s| u64::from(s) == n)
            })
    }
}

/// Builds a [`Rule`]; [`build`](Self::build) checks it.
#[derive(Debug)]
#[must_use]
pub struct RuleBuilder {
    name: String,
    verdict: Verdict,
    status: Option<Statuses>,
    codes: Vec<Code>,
    phrases: Vec<Box<str>>,
    fields: Vec<Field>,
    headers: Vec<HeaderTest>,
    wait: Option<Wait>,
    reason: Option<String>,
    /// The first mistake, reported by `build`.
    error: Option<ConfigError>,
}

impl RuleBuilder {
    fn fail(mut self, field: &'static str, message: String) -> Self {
        let name = &self.name;
        self.error
            .get_or_insert_with(|| ConfigError::new(field, format!("rule {name:?}: {message}")));
        self
    }

    /// Matches this status (or one of the others given).
    pub fn status(self, status: u16) -> Self {
        self.statuses(status, status)
    }

    /// Matches a status from `low` to `high`, inclusive.
    pub fn statuses(mut self, low: u16, high: u16) -> Self {
        match Statuses::range(low, high) {
            Ok(range) => {
                self.status
                    .get_or_insert_with(Statuses::default)
                    .0
                    .push(range);
                self
            }
            Err(message) => self.fail("rule.status", message),
        }
    }

    /// Matches an answer with this code (or one of the others given).
    pub fn code(mut self, code: &str) -> Self {
        if code.trim().is_empty() {
            return self.fail("rule.code", "a code must not be empty".into());
        }
        let text = code.trim();
        self.codes.push(Code {
            text: text.into(),
            number: text.parse().ok(),
        });
        self
    }

    /// Matches an answer whose message contains this phrase (or one of the
    /// others given), ignoring case in any script.
    pub fn phrase(mut self, text: &str) -> Self {
        match phrase(text) {
            Ok(p) => {
                self.phrases.push(p);
                self
            }
            Err(message) => self.fail("rule.phrase", message),
        }
    }

    /// Matches an answer whose body has a value at the JSON `pointer`.
    pub fn field_present(self, pointer: &str) -> Self {
        self.field(pointer, FieldTest::Present(true))
    }

    /// Matches an answer whose body has no value at the JSON `pointer`.
    pub fn field_absent(self, pointer: &str) -> Self {
        self.field(pointer, FieldTest::Present(false))
    }

    /// Matches an answer whose body's value at the JSON `pointer` equals one
    /// of `values`: strings ignoring ASCII case, numbers by value (`"1008"`
    /// equals `1008`), `true`/`false`.
    pub fn field_equals<S: AsRef<str>>(
        self,
        pointer: &str,
        values: impl IntoIterator<Item = S>,
    ) -> Self {
        let values: Vec<Scalar> = values
            .into_iter()
            .map(|v| Scalar::parse(v.as_ref()))
            .collect();
        if values.is_empty() {
            return self.fail("rule.field.equals", "needs at least one value".into());
        }
        self.field(pointer, FieldTest::Equals(values))
    }

    /// Matches an answer whose body's value at the JSON `pointer` is a
    /// string containing `phrase`, ignoring case.
    pub fn field_contains(self, pointer: &str, text: &str) -> Self {
        match phrase(text) {
            Ok(p) => self.field(pointer, FieldTest::Contains(p)),
            Err(message) => self.fail("rule.field.contains", message),
        }
    }

    fn field(mut self, pointer: &str, test: FieldTest) -> Self {
        match pointer::parse(pointer) {
            Ok(tokens) => {
                self.fields.push(Field {
                    tokens,
                    slot: 0,
                    test,
                });
                self
            }
            Err(message) => self.fail("rule.field.pointer", message),
        }
    }

    /// Matches an answer that carries the header `name`.
    pub fn header_present(self, name: &str) -> Self {
        self.header(name, None)
    }

    /// Matches an answer whose header `name` equals `value`, ignoring ASCII case.
    pub fn header_equals(self, name: &str, value: &str) -> Self {
        self.header(
            name,
            Some(HeaderValueTest::Equals(value.to_ascii_lowercase())),
        )
    }

    /// Matches an answer whose header `name` contains `value`, ignoring ASCII case.
    pub fn header_contains(self, name: &str, value: &str) -> Self {
        if value.trim().is_empty() {
            return self.fail(
                "rule.header",
                format!("header {name:?}: a text to contain must not be empty"),
            );
        }
        self.header(
            name,
            Some(HeaderValueTest::Contains(value.to_ascii_lowercase())),
        )
    }

    fn header(mut self, name: &str, value: Option<HeaderValueTest>) -> Self {
        match HeaderName::from_bytes(name.trim().as_bytes()) {
            Ok(name) => {
                self.headers.push(HeaderTest {
                    name,
                    value,
                    slot: 0,
                });
                self
            }
            Err(_) => self.fail("rule.header", format!("{name:?} is not a header name")),
        }
    }

    /// Decides this wait, whatever the answer's hints say.
    pub fn wait(mut self, wait: Duration) -> Self {
        if wait.is_zero() {
            return self.fail("rule.wait", "must be greater than zero, got 0s".into());
        }
        self.wait = Some(Wait::Fixed(wait));
        self
    }

    /// Reads the wait from the body's value at the JSON `pointer`: a number
    /// of seconds (fractional included) or a duration such as `"1m20s"`. An
    /// answer without a usable value there keeps the built-in hint.
    pub fn wait_field(self, pointer: &str) -> Self {
        self.wait_field_in(pointer, Unit::Seconds)
    }

    /// [`wait_field`](Self::wait_field) for a field that counts milliseconds.
    pub fn wait_field_millis(self, pointer: &str) -> Self {
        self.wait_field_in(pointer, Unit::Millis)
    }

    fn wait_field_in(mut self, pointer: &str, unit: Unit) -> Self {
        match pointer::parse(pointer) {
            Ok(tokens) => {
                self.wait = Some(Wait::Field {
                    tokens,
                    slot: 0,
                    unit,
                });
                self
            }
            Err(message) => self.fail("rule.wait.pointer", message),
        }
    }

    /// The reason events and metrics carry (default: the rule's name).
    pub fn reason(mut self, reason: &str) -> Self {
        self.reason = Some(reason.to_owned());
        self
    }

    /// The rule, or the first mistake in it, naming the field.
    pub fn build(self) -> Result<Rule, ConfigError> {
        if let Some(e) = self.error {
            return Err(e);
        }
        let name = self.name.trim();
        label("rule.name", name)?;
        let reason = self.reason.as_deref().map_or(name, str::trim);
        label("rule.reason", reason)
            .map_err(|e| ConfigError::new(e.field, format!("rule {name:?}: {}", e.message)))?;
        let err = |field, message: &str| {
            Err(ConfigError::new(field, format!("rule {name:?}: {message}")))
        };
        if self.status.is_none()
            && self.codes.is_empty()
            && self.phrases.is_empty()
            && self.fields.is_empty()
            && self.headers.is_empty()
        {
            return err(
                "rule",
                "needs at least one condition (status, code, phrase, field or header), or it would decide every error",
            );
        }
        // A rule for a success names what tells the error apart, or it
        // would decide every success.
        let success = self
            .status
            .as_ref()
            .is_some_and(|s| s.0.iter().any(|&(low, _)| low < 300));
        let tells = !self.codes.is_empty()
            || !self.phrases.is_empty()
            || !self.headers.is_empty()
            || self
                .fields
                .iter()
                .any(|f| f.test != FieldTest::Present(false));
        if success && !tells {
            return err(
                "rule",
                "a rule for a success status (2xx) needs a code, a phrase, a header or a field that is present, equal or contains something, or it would decide every success",
            );
        }
        if self.wait.is_some() && !matches!(self.verdict, Verdict::Throttled | Verdict::Quota) {
            return err(
                "rule.wait",
                &format!(
                    "a wait applies to a throttled or quota verdict only, not {}",
                    self.verdict
                ),
            );
        }
        Ok(Rule {
            name: name.into(),
            status: self.status,
            codes: self.codes,
            phrases: self.phrases,
            phrase_ids: Vec::new(),
            fields: self.fields,
            headers: self.headers,
            verdict: self.verdict,
            wait: self.wait,
            reason: Reason::new_owned(reason.to_owned()),
        })
    }
}

/// A name or reason: 1 to [`Rule::MAX_LABEL`] bytes of `[A-Za-z0-9_.:-]`, since
/// it becomes a metric label and an event field.
fn label(field: &'static str, s: &str) -> Result<(), ConfigError> {
    let plain = |c: char| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | ':' | '-');
    if s.is_empty() || s.len() > Rule::MAX_LABEL || !s.chars().all(plain) {
        return Err(ConfigError::new(
            field,
            format!(
                "must be 1 to {} characters of A-Z, a-z, 0-9, `_`, `.`, `:`, `-`, got {s:?}",
                Rule::MAX_LABEL
            ),
        ));
    }
    Ok(())
}

// === conditions ===

/// Statuses as inclusive ranges.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
struct Statuses(Vec<(u16, u16)>);

impl Statuses {
    fn range(low: u16, high: u16) -> Result<(u16, u16), String> {
        if !(100..=999).contains(&low) || !(100..=999).contains(&high) {
            return Err(format!("a status is 100 to 999, got {low}-{high}"));
        }
        if low > high {
            return Err(format!("a range runs low to high, got {low}-{high}"));
        }
        Ok((low, high))
    }

    /// `429`, `"4xx"` or `"400-403"`.
    #[cfg(any(feature = "serde", test))]
    fn parse_one(text: &str) -> Result<(u16, u16), String> {
        let text = text.trim();
        let num = |s: &str| {
            s.trim().parse::<u16>().map_err(|_| {
                format!("expected a status such as 429, \"4xx\" or \"400-403\", got {text:?}")
            })
        };
        if let Some(class) = text.strip_suffix("xx").or_else(|| text.strip_suffix("XX"))
            && class.len() == 1
        {
            let c = num(class)?;
            return Statuses::range(c * 100, c * 100 + 99);
        }
        match text.split_once('-') {
            Some((low, high)) => Statuses::range(num(low)?, num(high)?),
            None => {
                let n = num(text)?;
                Statuses::range(n, n)
            }
        }
    }

    fn contains(&self, status: u16) -> bool {
        self.0
            .iter()
            .any(|&(low, high)| (low..=high).contains(&status))
    }
}

/// A phrase as the rules match it: trimmed, lowercased in any script,
/// not empty.
fn phrase(text: &str) -> Result<Box<str>, String> {
    let text = lowercase(text.trim());
    if text.is_empty() {
        return Err("a phrase must not be empty".into());
    }
    Ok(text.into())
}

/// A value a field is compared with.
#[derive(Clone, Debug, PartialEq)]
enum Scalar {
    Text(String),
    Number(f64),
    Bool(bool),
}

impl Eq for Scalar {}

impl Scalar {
    /// From the text a user wrote: a number, `true`/`false`, else text.
    fn parse(s: &str) -> Scalar {
        match s.trim() {
            "true" => Scalar::Bool(true),
            "false" => Scalar::Bool(false),
            t => match t.parse::<f64>() {
                Ok(n) if n.is_finite() => Scalar::Number(n),
                _ => Scalar::Text(t.to_owned()),
            },
        }
    }

    fn equals(&self, found: &Found) -> bool {
        match (self, found) {
            (Scalar::Text(a), Found::Str(b)) => a.eq_ignore_ascii_case(b),
            (Scalar::Number(a), Found::Num(b)) => a == b,
            (Scalar::Number(a), Found::Str(b)) => b.trim().parse::<f64>().is_ok_and(|b| *a == b),
            (Scalar::Bool(a), Found::Bool(b)) => a == b,
            _ => false,
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
enum FieldTest {
    Present(bool),
    Equals(Vec<Scalar>),
    Contains(Box<str>),
}

impl FieldTest {
    fn holds(&self, found: &Found) -> bool {
        match self {
            FieldTest::Present(want) => (*found != Found::Absent) == *want,
            FieldTest::Equals(values) => values.iter().any(|v| v.equals(found)),
            FieldTest::Contains(phrase) => match found {
                Found::Str(s) => lowercase(s).contains(&**phrase),
                _ => false,
            },
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
struct Field {
    tokens: Vec<String>,
    /// Where the set's one read puts its value.
    slot: usize,
    test: FieldTest,
}

#[derive(Clone, Debug, PartialEq, Eq)]
enum HeaderValueTest {
    Equals(String),
    Contains(String),
}

#[derive(Clone, Debug, PartialEq, Eq)]
struct HeaderTest {
    name: HeaderName,
    value: Option<HeaderValueTest>,
    /// Where the set's one walk over the headers puts its values.
    slot: usize,
}

impl HeaderTest {
    /// Whether any of the header's `values` passes the test.
    fn holds(&self, values: &[&[u8]]) -> bool {
        values.iter().any(|v| {
            let Some(test) = &self.value else {
                return true;
            };
            let v = v.trim_ascii();
            match test {
                HeaderValueTest::Equals(want) => v.eq_ignore_ascii_case(want.as_bytes()),
                HeaderValueTest::Contains(want) => v
                    .windows(want.len().max(1))
                    .any(|w| w.eq_ignore_ascii_case(want.as_bytes())),
            }
        })
    }
}

// === the wait ===

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Unit {
    Seconds,
    Millis,
}

impl Unit {
    /// The wait a field's value says: a number in this unit, a numeric
    /// string, or a duration (`"1m20s"`, `"20.5s"`).
    fn read(self, found: &Found) -> Option<Duration> {
        let number = match found {
            Found::Num(n) => Some(*n),
            Found::Str(s) => s.trim().parse::<f64>().ok(),
            _ => None,
        };
        let wait = match number {
            Some(n) => {
                let secs = match self {
                    Unit::Seconds => n,
                    Unit::Millis => n / 1000.0,
                };
                Duration::try_from_secs_f64(secs).ok()
            }
            None => match found {
                Found::Str(s) => hints::go_duration(s.trim()),
                _ => None,
            },
        };
        wait.filter(|w| !w.is_zero())
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
enum Wait {
    Fixed(Duration),
    Field {
        tokens: Vec<String>,
        slot: usize,
        unit: Unit,
    },
}

#[cfg(test)]
mod tests;
