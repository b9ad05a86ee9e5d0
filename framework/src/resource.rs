//! The resource vector, with Volcano's units and comparison semantics.
//!
//! Units: `cpu` in millicores, `memory` in bytes, `pods` in whole pods, every other
//! scalar or extended resource (`nvidia.com/gpu`, `ephemeral-storage`, hugepages…) in
//! milli-units (one GPU is 1000). Quota-only names (`count/*`) are skipped.
//!
//! Two values closer than [`MIN_RESOURCE`] compare equal. Scalars live in a small sorted
//! inline vector, so the common shapes (`pods` plus one GPU kind) never allocate.

use std::cmp::Ordering;
use std::fmt;
use std::sync::Arc;

use smallvec::SmallVec;
use volcano_api::crd::ResourceList;
use volcano_api::quantity::{self, QuantityError};

/// Volcano's epsilon: two quantities closer than this are equal.
pub const MIN_RESOURCE: f64 = 0.1;

/// Name of a scalar resource (`pods`, `nvidia.com/gpu`, …), cheap to clone: the common
/// names are static, the others shared.
#[derive(Clone, Debug)]
pub struct ResourceName(NameRepr);

#[derive(Clone, Debug)]
enum NameRepr {
    Static(&'static str),
    Shared(Arc<str>),
}

/// Names that every cluster uses, kept without allocation.
const COMMON_NAMES: [&str; 5] = [PODS, NVIDIA_GPU, "ephemeral-storage", "amd.com/gpu", "hugepages-2Mi"];

impl ResourceName {
    /// The name for this text.
    pub fn new(name: &str) -> Self {
        match COMMON_NAMES.iter().find(|n| **n == name) {
            Some(n) => ResourceName(NameRepr::Static(n)),
            None => ResourceName(NameRepr::Shared(Arc::from(name))),
        }
    }
}

impl std::ops::Deref for ResourceName {
    type Target = str;
    fn deref(&self) -> &str {
        match &self.0 {
            NameRepr::Static(s) => s,
            NameRepr::Shared(s) => s,
        }
    }
}

/// Compares two names, first by address: the common names are the same static strings.
#[inline]
fn cmp_name(a: &str, b: &str) -> Ordering {
    if std::ptr::eq(a.as_ptr(), b.as_ptr()) && a.len() == b.len() {
        Ordering::Equal
    } else {
        a.cmp(b)
    }
}

impl PartialEq for ResourceName {
    #[inline]
    fn eq(&self, other: &Self) -> bool {
        cmp_name(self, other) == Ordering::Equal
    }
}
impl Eq for ResourceName {}
impl PartialOrd for ResourceName {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for ResourceName {
    #[inline]
    fn cmp(&self, other: &Self) -> Ordering {
        cmp_name(self, other)
    }
}
impl fmt::Display for ResourceName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self)
    }
}

/// The `pods` resource name.
pub const PODS: &str = "pods";
/// The NVIDIA GPU resource name.
pub const NVIDIA_GPU: &str = "nvidia.com/gpu";

/// Requests that only GPU cards account (`crate::device`), left out of the vector as
/// Volcano's `IgnoredDevicesList` leaves them: HAMi vGPU memory, memory percentage and
/// compute per card.
pub const CARD_ONLY_RESOURCES: [&str; 3] =
    ["volcano.sh/vgpu-memory", "volcano.sh/vgpu-memory-percentage", "volcano.sh/vgpu-cores"];

/// How a dimension missing on one side of a comparison is treated.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DimensionDefault {
    /// A missing dimension is zero.
    Zero,
    /// A missing dimension on the right is unlimited.
    Infinity,
}

/// A resource vector: cpu, memory and named scalars.
///
/// Equality counts a missing scalar as zero: a sum that had a request added and taken away
/// again keeps the request's dimensions at zero, and is equal to the sum before.
#[derive(Clone, Default)]
pub struct Resource {
    /// Millicores.
    pub milli_cpu: f64,
    /// Bytes.
    pub memory: f64,
    /// Other resources, sorted by name, never duplicated.
    scalars: SmallVec<[(ResourceName, f64); 2]>,
}

impl fmt::Debug for Resource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "cpu {:.2}, memory {:.2}", self.milli_cpu, self.memory)?;
        for (n, v) in &self.scalars {
            write!(f, ", {n} {v:.2}")?;
        }
        Ok(())
    }
}

impl PartialEq for Resource {
    fn eq(&self, other: &Self) -> bool {
        if self.milli_cpu != other.milli_cpu || self.memory != other.memory {
            return false;
        }
        let zero_elsewhere = |a: &Resource, b: &Resource| a.scalars.iter().all(|(n, v)| b.get(n.as_ref()) == *v);
        zero_elsewhere(self, other) && zero_elsewhere(other, self)
    }
}

impl fmt::Display for Resource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self, f)
    }
}

fn le(l: f64, r: f64) -> bool {
    l < r || (l - r).abs() < MIN_RESOURCE
}

/// The scalar part of [`Resource::less_equal`]: `a ≤ b` where `b` has the names of
/// `b_names` and the values `b_value(j)`. Both lists are sorted by name: walk them together.
fn scalars_le(
    a: &[(ResourceName, f64)],
    b_names: &[(ResourceName, f64)],
    b_value: impl Fn(usize) -> f64,
    default: DimensionDefault,
) -> bool {
    let (mut i, mut j) = (0, 0);
    while i < a.len() || j < b_names.len() {
        let ord = match (a.get(i), b_names.get(j)) {
            (Some((x, _)), Some((y, _))) => x.cmp(y),
            (Some(_), None) => Ordering::Less,
            _ => Ordering::Greater,
        };
        match ord {
            Ordering::Equal => {
                if !le(a[i].1, b_value(j)) {
                    return false;
                }
                i += 1;
                j += 1;
            }
            Ordering::Less => {
                // Only on the left: the right is 0 or unlimited.
                if default == DimensionDefault::Zero && !le(a[i].1, 0.0) {
                    return false;
                }
                i += 1;
            }
            Ordering::Greater => {
                // Only on the right: left is 0 there, and 0 ≤ anything non-negative.
                if !le(0.0, b_value(j)) {
                    return false;
                }
                j += 1;
            }
        }
    }
    true
}

impl Resource {
    /// The empty vector.
    pub fn empty() -> Self {
        Self::default()
    }

    /// A vector from cpu millicores and memory bytes.
    pub fn new(milli_cpu: f64, memory: f64) -> Self {
        Self { milli_cpu, memory, scalars: SmallVec::new() }
    }

    /// Builds a vector from a Kubernetes resource list, converting units as Volcano does.
    pub fn from_list(list: &ResourceList) -> Result<Self, (String, QuantityError)> {
        let mut r = Resource::empty();
        r.add_list(list, None)?;
        Ok(r)
    }

    /// Adds a Kubernetes resource list, converting units as Volcano does; `skip` names
    /// dimensions to leave out (used to give requests precedence over limits).
    pub fn add_list(
        &mut self,
        list: &ResourceList,
        skip: Option<&ResourceList>,
    ) -> Result<(), (String, QuantityError)> {
        for (name, q) in list {
            if skip.is_some_and(|s| s.contains_key(name)) {
                continue;
            }
            let fail = |e| (name.clone(), e);
            match name.as_str() {
                "cpu" => self.milli_cpu += quantity::parse_milli(&q.0).map_err(fail)?,
                "memory" => self.memory += quantity::parse_value(&q.0).map_err(fail)?,
                PODS => self.add_scalar(PODS, quantity::parse_value(&q.0).map_err(fail)?),
                n if n.starts_with("count/") => {}
                n if CARD_ONLY_RESOURCES.contains(&n) => {}
                n => self.add_scalar(n, quantity::parse_milli(&q.0).map_err(fail)?),
            }
        }
        Ok(())
    }

    /// Sets one dimension by name (`cpu`, `memory` or a scalar), in internal units.
    pub fn set(&mut self, name: &str, value: f64) {
        match name {
            "cpu" => self.milli_cpu = value,
            "memory" => self.memory = value,
            n => match self.scalars.binary_search_by(|(k, _)| cmp_name(k, n)) {
                Ok(i) => self.scalars[i].1 = value,
                Err(i) => self.scalars.insert(i, (ResourceName::new(n), value)),
            },
        }
    }

    /// Adds to a scalar dimension, creating it.
    pub fn add_scalar(&mut self, name: &str, value: f64) {
        match self.scalars.binary_search_by(|(k, _)| cmp_name(k, name)) {
            Ok(i) => self.scalars[i].1 += value,
            Err(i) => self.scalars.insert(i, (ResourceName::new(name), value)),
        }
    }

    /// The value of a dimension by name (0 if absent).
    pub fn get(&self, name: &str) -> f64 {
        match name {
            "cpu" => self.milli_cpu,
            "memory" => self.memory,
            n => self.scalar(n).unwrap_or(0.0),
        }
    }

    /// The value of a scalar, if the dimension is present.
    #[inline]
    pub fn scalar(&self, name: &str) -> Option<f64> {
        // The common names are the same static strings: try addresses before comparing text.
        for (k, v) in &self.scalars {
            if k.len() == name.len() && std::ptr::eq(k.as_ptr(), name.as_ptr()) {
                return Some(*v);
            }
        }
        self.scalars.binary_search_by(|(k, _)| cmp_name(k, name)).ok().map(|i| self.scalars[i].1)
    }

    /// Whether the scalar dimension is present.
    pub fn has_scalar(&self, name: &str) -> bool {
        self.scalar(name).is_some()
    }

    /// The scalar dimensions, sorted by name.
    pub fn scalars(&self) -> impl Iterator<Item = (&ResourceName, f64)> + '_ {
        self.scalars.iter().map(|(n, v)| (n, *v))
    }

    /// Every dimension as (name, value): `cpu`, `memory`, then scalars by name.
    pub fn dims(&self) -> impl Iterator<Item = (&str, f64)> + '_ {
        [("cpu", self.milli_cpu), ("memory", self.memory)]
            .into_iter()
            .chain(self.scalars.iter().map(|(n, v)| (&**n, *v)))
    }

    /// The names of all dimensions present.
    pub fn names(&self) -> impl Iterator<Item = &str> + '_ {
        self.dims().map(|(n, _)| n)
    }

    /// True when every dimension except `pods` is below the epsilon.
    pub fn is_empty(&self) -> bool {
        self.milli_cpu < MIN_RESOURCE
            && self.memory < MIN_RESOURCE
            && self.scalars.iter().all(|(n, v)| &**n == PODS || *v < MIN_RESOURCE)
    }

    /// True when every dimension is zero (within the epsilon), `pods` included.
    pub fn is_zero_all(&self) -> bool {
        self.milli_cpu < MIN_RESOURCE
            && self.memory < MIN_RESOURCE
            && self.scalars.iter().all(|(_, v)| *v < MIN_RESOURCE)
    }

    /// `self += other`.
    pub fn add(&mut self, other: &Resource) -> &mut Self {
        self.milli_cpu += other.milli_cpu;
        self.memory += other.memory;
        self.merge_scalars(other, |a, b| a + b);
        self
    }

    /// `self -= other`; callers make sure `other ≤ self` (Volcano asserts it).
    pub fn sub(&mut self, other: &Resource) -> &mut Self {
        debug_assert!(
            other.less_equal(self, DimensionDefault::Zero),
            "resource is not sufficient to do operation: {self:?} sub {other:?}"
        );
        self.sub_unchecked(other)
    }

    /// `self -= other` without the sufficiency check; dimensions may go negative.
    pub fn sub_unchecked(&mut self, other: &Resource) -> &mut Self {
        self.milli_cpu -= other.milli_cpu;
        self.memory -= other.memory;
        self.merge_scalars(other, |a, b| a - b);
        self
    }

    /// `self -= other`, clamping every dimension at zero.
    pub fn sub_floor(&mut self, other: &Resource) -> &mut Self {
        self.milli_cpu = (self.milli_cpu - other.milli_cpu).max(0.0);
        self.memory = (self.memory - other.memory).max(0.0);
        self.merge_scalars(other, |a, b| (a - b).max(0.0));
        self
    }

    /// Multiplies every dimension.
    pub fn multi(&mut self, ratio: f64) -> &mut Self {
        self.milli_cpu *= ratio;
        self.memory *= ratio;
        for (_, v) in &mut self.scalars {
            *v *= ratio;
        }
        self
    }

    /// Per-dimension maximum (dimensions of either side).
    pub fn set_max(&mut self, other: &Resource) -> &mut Self {
        self.milli_cpu = self.milli_cpu.max(other.milli_cpu);
        self.memory = self.memory.max(other.memory);
        self.merge_scalars(other, f64::max);
        self
    }

    /// Per-dimension minimum; a dimension missing on `other` is 0 (`Zero`) or keeps
    /// `self`'s value (`Infinity`).
    pub fn min_dimension(&mut self, other: &Resource, default: DimensionDefault) -> &mut Self {
        self.milli_cpu = self.milli_cpu.min(other.milli_cpu);
        self.memory = self.memory.min(other.memory);
        for (n, v) in &mut self.scalars {
            match other.scalar(n) {
                Some(o) => *v = v.min(o),
                None if default == DimensionDefault::Zero => *v = 0.0,
                None => {}
            }
        }
        self
    }

    /// Positive part of `self − other` per dimension (Volcano `ExceededPart`).
    pub fn exceeded_part(&self, other: &Resource) -> Resource {
        let mut r = self.clone();
        r.sub_floor(other);
        r
    }

    fn merge_scalars(&mut self, other: &Resource, f: impl Fn(f64, f64) -> f64) {
        // The common case: both sides have the same dimensions.
        if self.scalars.len() == other.scalars.len()
            && self.scalars.iter().zip(&other.scalars).all(|((a, _), (b, _))| a == b)
        {
            for ((_, a), (_, b)) in self.scalars.iter_mut().zip(&other.scalars) {
                *a = f(*a, *b);
            }
            return;
        }
        for (n, v) in &other.scalars {
            match self.scalars.binary_search_by(|(k, _)| k.cmp(n)) {
                Ok(i) => self.scalars[i].1 = f(self.scalars[i].1, *v),
                Err(i) => self.scalars.insert(i, (n.clone(), f(0.0, *v))),
            }
        }
    }

    /// `self ≤ other` on every dimension, within the epsilon (Volcano `LessEqual`).
    /// A dimension missing on the right is 0 (`Zero`) or unlimited (`Infinity`).
    pub fn less_equal(&self, other: &Resource, default: DimensionDefault) -> bool {
        if !le(self.milli_cpu, other.milli_cpu) || !le(self.memory, other.memory) {
            return false;
        }
        scalars_le(&self.scalars, &other.scalars, |j| other.scalars[j].1, default)
    }

    /// `self ≤ a − b` ([`Resource::less_equal`] with `Zero`, against `a` after
    /// [`Resource::sub_unchecked`] of `b`), without building the difference when `a` and
    /// `b` have the same scalar dimensions.
    pub fn less_equal_difference(&self, a: &Resource, b: &Resource) -> bool {
        let same =
            a.scalars.len() == b.scalars.len() && a.scalars.iter().zip(&b.scalars).all(|((x, _), (y, _))| x == y);
        if !same {
            let mut d = a.clone();
            d.sub_unchecked(b);
            return self.less_equal(&d, DimensionDefault::Zero);
        }
        if !le(self.milli_cpu, a.milli_cpu - b.milli_cpu) || !le(self.memory, a.memory - b.memory) {
            return false;
        }
        scalars_le(&self.scalars, &a.scalars, |j| a.scalars[j].1 - b.scalars[j].1, DimensionDefault::Zero)
    }

    /// `self ≤ other` only on the dimensions that `req` asks for (> epsilon), `pods`
    /// ignored (Volcano `LessEqualWithDimension`). A dimension missing on `other` is 0.
    pub fn less_equal_with_dimension(&self, other: &Resource, req: &Resource) -> bool {
        if req.milli_cpu > MIN_RESOURCE && !le(self.milli_cpu, other.milli_cpu) {
            return false;
        }
        if req.memory > MIN_RESOURCE && !le(self.memory, other.memory) {
            return false;
        }
        for (n, v) in &req.scalars {
            if &**n == PODS || *v <= MIN_RESOURCE {
                continue;
            }
            let l = self.scalar(n).unwrap_or(0.0);
            let r = other.scalar(n).unwrap_or(0.0);
            if !le(l, r) {
                return false;
            }
        }
        true
    }

    /// `self < other` strictly on every dimension (missing right scalars per `default`).
    pub fn less(&self, other: &Resource, default: DimensionDefault) -> bool {
        if self.milli_cpu >= other.milli_cpu || self.memory >= other.memory {
            return false;
        }
        for (n, l) in &self.scalars {
            match other.scalar(n) {
                Some(r) => {
                    if *l >= r {
                        return false;
                    }
                }
                None => {
                    if default == DimensionDefault::Zero {
                        return false;
                    }
                }
            }
        }
        true
    }

    /// [`Resource::insufficient_dims`] as a bit set over [`Resource::dims`] (bit `i` for the
    /// `i`-th dimension); `None` when a dimension beyond the 64th is insufficient.
    pub fn insufficient_mask(&self, other: &Resource) -> Option<u64> {
        let mut mask = 0u64;
        for (i, (n, v)) in self.dims().enumerate() {
            if v > MIN_RESOURCE && !le(v, other.get(n)) {
                if i >= 64 {
                    return None;
                }
                mask |= 1 << i;
            }
        }
        Some(mask)
    }

    /// True when every dimension is exactly zero (adding or subtracting it changes nothing).
    pub fn is_exact_zero(&self) -> bool {
        self.milli_cpu == 0.0 && self.memory == 0.0 && self.scalars.iter().all(|(_, v)| *v == 0.0)
    }

    /// The names of the dimensions where `self` exceeds `other` (for "Insufficient" messages).
    pub fn insufficient_dims<'a>(&'a self, other: &'a Resource) -> impl Iterator<Item = &'a str> + 'a {
        self.dims().filter(move |(n, v)| *v > MIN_RESOURCE && !le(*v, other.get(n))).map(|(n, _)| n)
    }

    /// Prints the vector as a Kubernetes resource list (quantity notation).
    pub fn to_list(&self) -> ResourceList {
        // A scalar at zero (one that went back to zero, as a sum does when tasks leave) is
        // left out: absent and zero mean the same, and two sums of the same tasks must
        // give the same list.
        self.dims()
            .filter(|(n, v)| matches!(*n, "cpu" | "memory") || *v != 0.0)
            .map(|(n, v)| {
                let q = match n {
                    "cpu" => quantity::format_milli(v),
                    "memory" => quantity::format_bytes(v),
                    PODS => format!("{}", v.round() as i64),
                    _ => quantity::format_milli(v),
                };
                (n.to_string(), k8s_openapi::apimachinery::pkg::api::resource::Quantity(q))
            })
            .collect()
    }
}

/// Volcano `Share(a, b)`: `a / b`, with `0/0 = 0` and `x/0 = 1`.
pub fn share(allocated: f64, total: f64) -> f64 {
    if total == 0.0 {
        if allocated == 0.0 {
            0.0
        } else {
            1.0
        }
    } else {
        allocated / total
    }
}

/// Compares two floats as Volcano's order functions do (equal within 1e-9).
pub fn cmp_f64(a: f64, b: f64) -> Ordering {
    if (a - b).abs() < 1e-9 {
        Ordering::Equal
    } else if a < b {
        Ordering::Less
    } else {
        Ordering::Greater
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

    fn list(items: &[(&str, &str)]) -> ResourceList {
        items.iter().map(|(k, v)| (k.to_string(), Quantity(v.to_string()))).collect()
    }

    #[test]
    fn units_follow_volcano() {
        let r = Resource::from_list(&list(&[
            ("cpu", "1500m"),
            ("memory", "1Gi"),
            ("nvidia.com/gpu", "2"),
            ("pods", "110"),
            ("count/pods", "3"),
        ]))
        .unwrap();
        assert_eq!(r.milli_cpu, 1500.0);
        assert_eq!(r.memory, 1073741824.0);
        assert_eq!(r.get(NVIDIA_GPU), 2000.0);
        assert_eq!(r.get(PODS), 110.0);
        assert!(!r.has_scalar("count/pods"));
        assert_eq!(r.to_list()["nvidia.com/gpu"].0, "2");
    }

    #[test]
    fn less_equal_difference_is_less_equal_of_the_difference() {
        let vector = |cpu: f64, mem: f64, scalars: &[(&str, f64)]| {
            let mut r = Resource::new(cpu, mem);
            for (n, v) in scalars {
                r.add_scalar(n, *v);
            }
            r
        };
        let vectors = [
            Resource::empty(),
            vector(1000.0, 10.0, &[]),
            vector(4000.0, 64.0, &[(NVIDIA_GPU, 2000.0)]),
            vector(4000.0, 64.0, &[(NVIDIA_GPU, 1000.0)]),
            vector(500.0, 1.0, &[(NVIDIA_GPU, 3000.0), (PODS, 1.0)]),
            vector(8000.0, 128.0, &[("example.com/fpga", 1.0)]),
            vector(1000.05, 10.0, &[(NVIDIA_GPU, 0.05)]),
        ];
        for g in &vectors {
            for a in &vectors {
                for b in &vectors {
                    let mut d = a.clone();
                    d.sub_unchecked(b);
                    assert_eq!(
                        g.less_equal_difference(a, b),
                        g.less_equal(&d, DimensionDefault::Zero),
                        "{g:?} <= {a:?} - {b:?}"
                    );
                }
            }
        }
    }

    #[test]
    fn less_equal_defaults() {
        let mut gpu = Resource::new(1000.0, 0.0);
        gpu.add_scalar(NVIDIA_GPU, 1000.0);
        let cpu_only = Resource::new(2000.0, 10.0);
        assert!(!gpu.less_equal(&cpu_only, DimensionDefault::Zero));
        assert!(gpu.less_equal(&cpu_only, DimensionDefault::Infinity));
        // Within epsilon counts as equal.
        assert!(Resource::new(1000.05, 0.0).less_equal(&Resource::new(1000.0, 0.0), DimensionDefault::Zero));
        assert!(Resource::empty().is_empty());
        let mut pods_only = Resource::empty();
        pods_only.add_scalar(PODS, 1.0);
        assert!(pods_only.is_empty());
        assert!(!pods_only.is_zero_all());
    }

    #[test]
    fn less_equal_with_dimension_only_checks_requested_dims() {
        let used = Resource::new(5000.0, 100.0);
        let deserved = Resource::new(4000.0, 1000.0);
        let mem_req = Resource::new(0.0, 10.0);
        assert!(used.less_equal_with_dimension(&deserved, &mem_req));
        let cpu_req = Resource::new(10.0, 0.0);
        assert!(!used.less_equal_with_dimension(&deserved, &cpu_req));
    }

    #[test]
    fn share_edge_cases() {
        assert_eq!(share(0.0, 0.0), 0.0);
        assert_eq!(share(1.0, 0.0), 1.0);
        assert_eq!(share(1.0, 4.0), 0.25);
    }

    #[test]
    fn arithmetic() {
        let mut a = Resource::new(1000.0, 10.0);
        a.add_scalar(NVIDIA_GPU, 2000.0);
        let mut b = Resource::new(500.0, 20.0);
        b.add_scalar("example.com/foo", 1000.0);
        let ex = a.exceeded_part(&b);
        assert_eq!(ex.milli_cpu, 500.0);
        assert_eq!(ex.memory, 0.0);
        assert_eq!(ex.get(NVIDIA_GPU), 2000.0);
        let mut m = a.clone();
        m.min_dimension(&b, DimensionDefault::Zero);
        assert_eq!(m.get(NVIDIA_GPU), 0.0);
        let mut m = a.clone();
        m.min_dimension(&b, DimensionDefault::Infinity);
        assert_eq!(m.get(NVIDIA_GPU), 2000.0);
    }
}
