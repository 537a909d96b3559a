//! Large per-port arrays on huge pages.
//!
//! A big fabric's per-port state spans tens of megabytes touched at random, one line per access:
//! with 4 KiB pages nearly every access also misses the TLB. Where transparent huge pages are
//! enabled only on request (`madvise` mode, a common default), the arrays ask for them before
//! their pages are first touched. Only a hint: nothing changes if the kernel declines.

/// Arrays smaller than this gain nothing: they fit in a few TLB entries anyway.
const HUGE_PAGE_MIN_BYTES: usize = 4 << 20;

/// A vector filled from `items` (exactly `len` of them), its pages advised to be huge.
pub fn huge_vec<T>(len: usize, items: impl IntoIterator<Item = T>) -> Vec<T> {
    let mut v = Vec::with_capacity(len);
    advise_huge_pages(v.as_ptr() as *const u8, len * std::mem::size_of::<T>());
    v.extend(items);
    debug_assert_eq!(v.len(), len);
    v
}

/// `len` zeros, their pages advised to be huge. Large zeroed allocations come straight from
/// the kernel, untouched, so pages nothing writes to are never backed.
pub fn huge_zeroed(len: usize) -> Vec<u64> {
    let v = vec![0; len];
    advise_huge_pages(v.as_ptr() as *const u8, len * std::mem::size_of::<u64>());
    v
}

#[cfg(target_os = "linux")]
fn advise_huge_pages(ptr: *const u8, bytes: usize) {
    const PAGE: usize = 4096;
    if bytes < HUGE_PAGE_MIN_BYTES {
        return;
    }
    // madvise wants a page-aligned start; the partial pages at either end are left out.
    let start = (ptr as usize).next_multiple_of(PAGE);
    let end = (ptr as usize + bytes) / PAGE * PAGE;
    if end > start {
        // SAFETY: the range lies inside this vector's own allocation, and MADV_HUGEPAGE only
        // changes how the kernel backs it, never its contents. A failure is harmless.
        unsafe {
            libc::madvise(start as *mut libc::c_void, end - start, libc::MADV_HUGEPAGE);
        }
    }
}

#[cfg(not(target_os = "linux"))]
fn advise_huge_pages(_ptr: *const u8, _bytes: usize) {}
