//! [`Live`]: a setting the daemon read at start that `agency reload` may
//! replace while it runs. Readers take a snapshot (an `Arc`) and use it to
//! the end of what they are doing, so one request never sees half of the
//! old value and half of the new one; the next request sees the new one.

use std::sync::{Arc, RwLock};

/// A value replaced whole at reload.
#[derive(Debug, Default)]
pub struct Live<T> {
    value: RwLock<Arc<T>>,
}

impl<T> Live<T> {
    pub fn new(value: T) -> Live<T> {
        Live {
            value: RwLock::new(Arc::new(value)),
        }
    }

    /// The value now (a reload after this call does not change it).
    pub fn load(&self) -> Arc<T> {
        // A writer only swaps an `Arc`: it cannot panic half-way, so a
        // poisoned lock still holds a whole value.
        self.value
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    }

    /// Replace the value for every later [`Live::load`].
    pub fn store(&self, value: T) {
        *self
            .value
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = Arc::new(value);
    }
}
