//! Slices of plain numbers seen as their bytes (for copying them into and out of device memory).

/// A number type whose every bit pattern is a value and which has no padding, so that its
/// slices may be read and written as bytes.
///
/// # Safety
///
/// Implemented only for such types (the primitive integers and floats).
pub unsafe trait Plain: Copy + Default {}

macro_rules! plain {
    ($($t:ty),*) => {
        $(
            // SAFETY: a primitive number: no padding, every bit pattern a value.
            unsafe impl Plain for $t {}
        )*
    };
}
plain!(u8, u16, u32, u64, i8, i16, i32, i64, f32, f64);

/// The bytes of `data`.
pub fn as_bytes<T: Plain>(data: &[T]) -> &[u8] {
    // SAFETY: `T: Plain` has no padding, so all `size_of_val(data)` bytes are initialised; u8 has
    // no alignment requirement; the result borrows `data`.
    unsafe { std::slice::from_raw_parts(data.as_ptr().cast::<u8>(), std::mem::size_of_val(data)) }
}

/// The bytes of `data`, writable (any bytes written make valid values of `T: Plain`).
pub fn as_bytes_mut<T: Plain>(data: &mut [T]) -> &mut [u8] {
    let len = std::mem::size_of_val(data);
    // SAFETY: as in `as_bytes`; every bit pattern is a valid `T`, and the result borrows `data`
    // mutably, so nothing else sees it while it is written.
    unsafe { std::slice::from_raw_parts_mut(data.as_mut_ptr().cast::<u8>(), len) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_round_trip_through_their_bytes() {
        let a = [1u32, 0x0102_0304];
        assert_eq!(as_bytes(&a), &[1, 0, 0, 0, 4, 3, 2, 1]);
        let mut b = [0f32; 2];
        as_bytes_mut(&mut b)[..4].copy_from_slice(&1.5f32.to_le_bytes());
        assert_eq!(b, [1.5, 0.0]);
    }
}
