//! Unit tests of the classifier.
