//! From a dispatch's `kernel_object` to a kernel name, its model and its workgroup time.
//!
//! Order: the loader's code objects (`_amdgpu_r_debug`), then ROCr's raw blit kernels, else
//! an unknown kernel named by its address. Unknown kernels are logged once per name; they
//! complete after the default workgroup time with no memory effect.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use crate::config::Config;
use crate::device::Profile;
use crate::kernels::naming::Namer;
use crate::kernels::{blit, Dispatch, Fault, KernelCtx, Model, Registry};
use crate::kfd::memory::Memory;
use crate::sys::devmem::DeviceMemory;

#[derive(Clone, Debug)]
pub struct Resolved {
    pub name: Arc<str>,
    pub model: Option<Model>,
}

pub struct Resolver {
    namer: Namer,
    registry: Registry,
    cache: HashMap<u64, Resolved>,
    warned: HashSet<Arc<str>>,
}

impl Resolver {
    pub fn new(r_debug: Option<u64>) -> Self {
        Resolver { namer: Namer::new(r_debug), registry: Registry::builtin(), cache: HashMap::new(), warned: HashSet::new() }
    }

    /// The kernel behind `kernel_object`.
    pub fn resolve(&mut self, mem: &dyn DeviceMemory, memory: &Memory, kernel_object: u64) -> Resolved {
        if let Some(name) = self.namer.name(kernel_object) {
            // Loader names are authoritative and may change when code objects come and go.
            let model = self.registry.get(&name).copied();
            let r = Resolved { name: name.into(), model };
            self.warn_unknown(&r);
            return r;
        }
        if let Some(r) = self.cache.get(&kernel_object) {
            return r.clone();
        }
        let name: Arc<str> = if memory.device_accessible(kernel_object, 260) {
            blit::identify_rocr_blit(mem, kernel_object).map(Arc::from)
        } else {
            None
        }
        .unwrap_or_else(|| format!("kernel@{kernel_object:#x}").into());
        let r = Resolved { model: self.registry.get(&name).copied(), name };
        self.warn_unknown(&r);
        self.cache.insert(kernel_object, r.clone());
        r
    }

    fn warn_unknown(&mut self, r: &Resolved) {
        if r.model.is_none() && self.warned.insert(r.name.clone()) {
            tracing::warn!(kernel = %r.name, "xhsa-emu: no model for this kernel; it completes after its modelled time with no memory effect");
        }
    }
}

/// Run time of one workgroup: the config's profile for the name, else the model, else the
/// default.
pub fn wg_ns(cfg: &Config, r: &Resolved, ctx: &KernelCtx) -> Result<u64, Fault> {
    if let Some(p) = cfg.profile(&r.name) {
        return Ok(p.wg_ns);
    }
    match r.model {
        Some(m) => (m.wg_ns)(ctx),
        None => Ok(cfg.timing.default_wg_ns),
    }
}

/// Contention profile of one workgroup: the config's profile for the name, else the model's,
/// else zero (never slowed).
pub fn profile(cfg: &Config, r: &Resolved, ctx: &KernelCtx) -> Result<Profile, Fault> {
    if let Some(p) = cfg.profile(&r.name) {
        return Ok(p.contention());
    }
    match r.model {
        Some(m) => (m.profile)(ctx),
        None => Ok(Profile::default()),
    }
}

/// Runs the kernel's CPU model (its memory effect).
pub fn run(r: &Resolved, ctx: &KernelCtx) -> Result<(), Fault> {
    match r.model {
        Some(m) => (m.run)(ctx),
        None => Ok(()),
    }
}

/// A kernel context over real memory checked against the KFD memory table.
pub fn with_ctx<T>(d: &Dispatch, mem: &dyn DeviceMemory, memory: &Memory, f: impl FnOnce(&KernelCtx) -> T) -> T {
    let accessible = |a: u64, l: u64| memory.device_accessible(a, l);
    let ctx = KernelCtx { dispatch: d, mem, accessible: &accessible };
    f(&ctx)
}
