//! Kernel names from the loader's list of code objects: a dispatch's `kernel_object` is the
//! address of a kernel descriptor, i.e. the value of a `<name>.kd` symbol of a loaded code
//! object plus that object's load delta (`l_addr`).

use std::collections::{HashMap, HashSet};

use crate::sys::rdebug::{self, LoadedObject};

/// Maps kernel objects to names (and their code object's target), following the loader's
/// `r_debug` list.
#[derive(Debug, Default)]
pub struct Namer {
    r_debug: Option<u64>,
    /// The kernel descriptors (load address) of each code object on the list, as last read.
    seen: HashMap<LoadedObject, Vec<u64>>,
    names: HashMap<u64, String>,
    machs: HashMap<u64, u32>,
}

/// `EF_AMDGPU_MACH_AMDGCN_GFX90A`: the `e_flags` machine of gfx90a code objects.
pub const MACH_GFX90A: u32 = 0x3f;
/// `EF_AMDGPU_MACH_AMDGCN_GFX942`: gfx942 (the MI300 series' ISA, the MI308X's own).
pub const MACH_GFX942: u32 = 0x4c;

impl Namer {
    /// A namer reading the `r_debug` at this address (`_amdgpu_r_debug`), or none.
    pub fn new(r_debug: Option<u64>) -> Self {
        Namer { r_debug, ..Default::default() }
    }

    /// The name of the kernel whose descriptor is at `kernel_object`.
    pub fn name(&mut self, kernel_object: u64) -> Option<String> {
        self.refresh();
        self.names.get(&kernel_object).cloned()
    }

    /// The name of the kernel at `kernel_object` and the `EF_AMDGPU_MACH` of its code object,
    /// with one look at the loader's list (a dispatch's resolution needs both).
    pub fn name_and_mach(&mut self, kernel_object: u64) -> Option<(String, Option<u32>)> {
        self.refresh();
        let name = self.names.get(&kernel_object)?.clone();
        Some((name, self.machs.get(&kernel_object).copied()))
    }

    /// Re-reads the list; parses the code objects that appeared (only those: a library's list
    /// grows one object at a time), forgets those that went.
    fn refresh(&mut self) {
        let Some(rd) = self.r_debug else { return };
        let Some(objs) = rdebug::loaded_objects(rd) else { return };
        let now: HashSet<LoadedObject> = objs.into_iter().collect();
        let gone: Vec<LoadedObject> =
            self.seen.keys().filter(|o| !now.contains(*o)).cloned().collect();
        for o in gone {
            for at in self.seen.remove(&o).unwrap_or_default() {
                self.names.remove(&at);
                self.machs.remove(&at);
            }
        }
        for o in now {
            if self.seen.contains_key(&o) {
                continue;
            }
            let mut ats = Vec::new();
            if let Some(elf) = load_uri(&o.uri) {
                let mach = elf_mach(&elf);
                for (value, name) in kernel_symbols(&elf) {
                    let at = o.l_addr.wrapping_add(value);
                    self.names.insert(at, name);
                    if let Some(m) = mach {
                        self.machs.insert(at, m);
                    }
                    ats.push(at);
                }
            }
            self.seen.insert(o, ats);
        }
    }
}

/// The ELF image a loader URI names: `memory://PID#offset=0xADDR&size=N` or
/// `file://PATH[#offset=N&size=N]` (path percent-encoded).
pub fn load_uri(uri: &str) -> Option<Vec<u8>> {
    let (base, frag) = uri.split_once('#').unwrap_or((uri, ""));
    let mut offset = None;
    let mut size = None;
    for kv in frag.split('&') {
        if let Some((k, v)) = kv.split_once('=') {
            let n = if let Some(h) = v.strip_prefix("0x") {
                u64::from_str_radix(h, 16).ok()
            } else {
                v.parse().ok()
            };
            match k {
                "offset" => offset = n,
                "size" => size = n,
                _ => {}
            }
        }
    }
    if base.starts_with("memory://") {
        rdebug::read_self(offset?, usize::try_from(size?).ok()?)
    } else if let Some(path) = base.strip_prefix("file://") {
        // Only the object's own bytes: a fat library holds the code objects of every target
        // (ROCm 6.4's librocsparse is 1.6 GB), and its objects load one by one.
        use std::io::{Read, Seek, SeekFrom};
        let mut f = std::fs::File::open(percent_decode(path)).ok()?;
        let start = offset.unwrap_or(0);
        let len = match size {
            Some(s) => s,
            None => f.metadata().ok()?.len().checked_sub(start)?,
        };
        f.seek(SeekFrom::Start(start)).ok()?;
        let mut data = vec![0u8; usize::try_from(len).ok()?];
        f.read_exact(&mut data).ok()?;
        Some(data)
    } else {
        None
    }
}

fn percent_decode(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' && i + 2 < b.len() {
            if let Ok(v) = u8::from_str_radix(&s[i + 1..i + 3], 16) {
                out.push(v);
                i += 3;
                continue;
            }
        }
        out.push(b[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// The `EF_AMDGPU_MACH` field (`e_flags` bits 7:0) of an AMDGPU ELF64 image (`e_machine` 224),
/// e.g. 0x3f for gfx90a, 0x4c for gfx942.
pub fn elf_mach(elf: &[u8]) -> Option<u32> {
    if elf.len() < 64
        || &elf[0..4] != b"\x7fELF"
        || elf[4] != 2
        || u16::from_le_bytes([elf[18], elf[19]]) != 224
    {
        return None;
    }
    Some(u32::from_le_bytes(elf[48..52].try_into().ok()?) & 0xff)
}

/// `(st_value, name)` of every `<name>.kd` symbol of an ELF64 little-endian image.
pub fn kernel_symbols(elf: &[u8]) -> Vec<(u64, String)> {
    let mut out = Vec::new();
    let rd = |o: usize, n: usize| elf.get(o..o + n);
    let u16_at = |o: usize| rd(o, 2).map(|b| u16::from_le_bytes([b[0], b[1]]));
    let u32_at = |o: usize| rd(o, 4).map(|b| u32::from_le_bytes(b.try_into().expect("4")));
    let u64_at = |o: usize| rd(o, 8).map(|b| u64::from_le_bytes(b.try_into().expect("8")));
    if elf.len() < 64 || &elf[0..4] != b"\x7fELF" || elf[4] != 2 || elf[5] != 1 {
        return out;
    }
    let (Some(shoff), Some(shentsize), Some(shnum)) = (u64_at(0x28), u16_at(0x3a), u16_at(0x3c))
    else {
        return out;
    };
    let section = |i: usize| -> Option<(u32, u64, u64, u32, u64)> {
        let base = usize::try_from(shoff).ok()? + i * usize::from(shentsize);
        // sh_type, sh_offset, sh_size, sh_link, sh_entsize
        Some((
            u32_at(base + 4)?,
            u64_at(base + 0x18)?,
            u64_at(base + 0x20)?,
            u32_at(base + 0x28)?,
            u64_at(base + 0x38)?,
        ))
    };
    for i in 0..usize::from(shnum) {
        let Some((ty, off, size, link, entsize)) = section(i) else { continue };
        if (ty != 2 && ty != 11) || entsize < 24 {
            continue; // SHT_SYMTAB, SHT_DYNSYM
        }
        let Some((_, str_off, str_size, _, _)) = section(link as usize) else { continue };
        for s in 0..(size / entsize) {
            let e = (off + s * entsize) as usize;
            let (Some(name_off), Some(value)) = (u32_at(e), u64_at(e + 8)) else { break };
            let start = (str_off + u64::from(name_off)) as usize;
            let end = (str_off + str_size) as usize;
            let Some(bytes) = elf.get(start..end.min(elf.len())) else { continue };
            let name = &bytes[..bytes.iter().position(|&c| c == 0).unwrap_or(bytes.len())];
            if let Some(k) = std::str::from_utf8(name).ok().and_then(|n| n.strip_suffix(".kd")) {
                out.push((value, k.to_string()));
            }
        }
    }
    out.sort();
    out.dedup();
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decodes_file_uris() {
        assert_eq!(percent_decode("/a%20b/c"), "/a b/c");
        let dir = std::env::temp_dir().join(format!("xhsa-namer-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let f = dir.join("x y.bin");
        std::fs::write(&f, b"0123456789").unwrap();
        let uri = format!("file://{}#offset=2&size=3", f.display().to_string().replace(' ', "%20"));
        assert_eq!(load_uri(&uri).unwrap(), b"234");
        assert_eq!(
            load_uri(&format!("file://{}", f.display().to_string().replace(' ', "%20")))
                .unwrap()
                .len(),
            10
        );
        let at = |frag: &str| {
            load_uri(&format!("file://{}#{frag}", f.display().to_string().replace(' ', "%20")))
        };
        assert_eq!(at("offset=7").unwrap(), b"789", "an offset without a size: to the end");
        assert_eq!(at("offset=8&size=5"), None, "a range past the end");
        assert_eq!(at("offset=11"), None, "an offset past the end");
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn non_elf_has_no_kernels() {
        assert!(kernel_symbols(b"not an elf").is_empty());
        assert_eq!(elf_mach(b"not an elf"), None);
    }

    #[test]
    fn reads_the_amdgpu_machine() {
        let mut elf = vec![0u8; 64];
        elf[0..4].copy_from_slice(b"\x7fELF");
        elf[4] = 2;
        elf[5] = 1;
        elf[18..20].copy_from_slice(&224u16.to_le_bytes());
        elf[48..52].copy_from_slice(&0x53fu32.to_le_bytes()); // gfx90a, xnack any, sramecc any
        assert_eq!(elf_mach(&elf), Some(MACH_GFX90A));
    }
}
