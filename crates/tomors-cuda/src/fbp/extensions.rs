//! Typed per-device state of the layers above [`crate::fbp`].
//!
//! A [`CudaBackend`](crate::CudaBackend) and its engine hold one
//! [`Extensions`] map each, so that the cone-beam layer can keep its
//! settings and its compiled module per device without this layer naming
//! its types (which would make the layers import each other).

use std::any::{Any, TypeId};
use std::collections::HashMap;

/// A map from a type to one value of that type.
#[derive(Default)]
pub struct Extensions {
    map: HashMap<TypeId, Box<dyn Any + Send + Sync>>,
}

impl Extensions {
    /// The value of type `T`, if one was inserted.
    pub fn get<T: Any + Send + Sync>(&self) -> Option<&T> {
        self.map
            .get(&TypeId::of::<T>())
            .and_then(|b| b.downcast_ref::<T>())
    }

    /// Inserts (or replaces) the value of type `T`.
    pub fn insert<T: Any + Send + Sync>(&mut self, value: T) {
        self.map.insert(TypeId::of::<T>(), Box::new(value));
    }

    /// Takes the value of type `T` out of the map, if one was inserted.
    pub fn remove<T: Any + Send + Sync>(&mut self) -> Option<T> {
        self.map
            .remove(&TypeId::of::<T>())
            .and_then(|b| b.downcast::<T>().ok())
            .map(|b| *b)
    }
}

impl std::fmt::Debug for Extensions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Extensions({} entries)", self.map.len())
    }
}

#[cfg(test)]
mod tests {
    use super::Extensions;

    #[derive(Debug, PartialEq)]
    struct A(u32);

    #[test]
    fn stores_one_value_per_type() {
        let mut e = Extensions::default();
        assert!(e.get::<A>().is_none());
        e.insert(A(1));
        e.insert(7usize);
        e.insert(A(2));
        assert_eq!(e.get::<A>(), Some(&A(2)));
        assert_eq!(e.get::<usize>(), Some(&7));
        assert!(e.get::<u32>().is_none());
        assert_eq!(e.remove::<A>(), Some(A(2)));
        assert!(e.get::<A>().is_none());
        assert_eq!(e.remove::<A>(), None);
    }
}
