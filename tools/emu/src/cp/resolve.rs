//! From a dispatch's `kernel_object` to a kernel name, its model and its workgroup time.
//!
//! Order: the loader's code objects (`_amdgpu_r_debug`), then ROCr's raw blit kernels, else
//! an unknown kernel named by its address. A kernel without a CPU model runs on the ISA
//! interpreter ([`execute`]) unless a config `[[kernel]]` profile makes it timing-only; either
//! way it completes after its modelled time.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use crate::config::Config;
use crate::device::Profile;
use crate::isa::target::Target;
use crate::kernels::naming::Namer;
use crate::kernels::{blit, Dispatch, Fault, KernelCtx, Model, Registry};
use crate::kfd::memory::Memory;
use crate::sys::devmem::DeviceMemory;

#[derive(Clone, Debug)]
pub struct Resolved {
    pub name: Arc<str>,
    pub model: Option<Model>,
    /// The `EF_AMDGPU_MACH` of the kernel's code object, when the loader's list has it.
    pub mach: Option<u32>,
}

pub struct Resolver {
    namer: Namer,
    registry: Registry,
    cache: HashMap<u64, Resolved>,
    warned: HashSet<Arc<str>>,
}

impl Resolver {
    pub fn new(r_debug: Option<u64>) -> Self {
        Resolver {
            namer: Namer::new(r_debug),
            registry: Registry::builtin(),
            cache: HashMap::new(),
            warned: HashSet::new(),
        }
    }

    /// The kernel behind `kernel_object`.
    pub fn resolve(
        &mut self,
        mem: &dyn DeviceMemory,
        memory: &Memory,
        kernel_object: u64,
    ) -> Resolved {
        if let Some((name, mach)) = self.namer.name_and_mach(kernel_object) {
            // Loader names are authoritative and may change when code objects come and go.
            let model = self.registry.get(&name).copied();
            let r = Resolved { name: name.into(), model, mach };
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
        let r = Resolved { model: self.registry.get(&name).copied(), name, mach: None };
        self.warn_unknown(&r);
        self.cache.insert(kernel_object, r.clone());
        r
    }

    fn warn_unknown(&mut self, r: &Resolved) {
        if r.model.is_none() && self.warned.insert(r.name.clone()) {
            match r.mach {
                Some(m) if Target::from_mach(m).is_none() => {
                    tracing::warn!(kernel = %r.name, mach = format_args!("{m:#x}"), "xhsa-emu: no CPU model for this kernel and the ISA interpreter runs gfx90a and gfx942 code only; it completes after its modelled time with no memory effect")
                }
                _ => {
                    tracing::info!(kernel = %r.name, "xhsa-emu: no CPU model for this kernel; its code runs on the ISA interpreter unless a [[kernel]] profile makes it timing-only")
                }
            }
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

/// Whether the kernel's memory effect comes from executing its code: no CPU model, no config
/// `[[kernel]]` profile (profiled kernels are calibrated timing stand-ins, timing-only), and
/// code the interpreter decodes ([`target`]: gfx90a or gfx942; a code object for another
/// target stays timing-only).
pub fn interprets(cfg: &Config, r: &Resolved) -> bool {
    r.model.is_none() && cfg.profile(&r.name).is_none() && target(r, Target::default()).is_some()
}

/// The ISA the interpreter runs the kernel's code as: its code object's machine, or the ISA the
/// device reports (`device`) for a kernel object the loader's list does not name.
pub fn target(r: &Resolved, device: Target) -> Option<Target> {
    r.mach.map_or(Some(device), Target::from_mach)
}

/// Executes the kernel's code on the ISA interpreter for its memory effect.
pub fn execute(
    launch: &crate::isa::Launch,
    r: &Resolved,
    mem: &dyn DeviceMemory,
    memory: &Memory,
    services: &crate::isa::Services,
) -> Result<crate::isa::Stats, crate::isa::IsaError> {
    let accessible = |a: u64, l: u64| memory.device_accessible(a, l);
    let started = std::time::Instant::now();
    let res = crate::isa::run(launch, mem, &accessible, services);
    if let Ok(s) = &res {
        tracing::debug!(kernel = %r.name, workgroups = s.workgroups, waves = s.waves, instructions = s.instructions, us = started.elapsed().as_micros() as u64, "xhsa-emu: executed");
    }
    res
}

/// Runs the kernel's CPU model (its memory effect).
pub fn run(r: &Resolved, ctx: &KernelCtx) -> Result<(), Fault> {
    match r.model {
        Some(m) => (m.run)(ctx),
        None => Ok(()),
    }
}

/// A kernel context over real memory checked against the KFD memory table.
pub fn with_ctx<T>(
    d: &Dispatch,
    mem: &dyn DeviceMemory,
    memory: &Memory,
    f: impl FnOnce(&KernelCtx) -> T,
) -> T {
    let accessible = |a: u64, l: u64| memory.device_accessible(a, l);
    let ctx = KernelCtx { dispatch: d, mem, accessible: &accessible };
    f(&ctx)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_gfx90a_and_gfx942_code_without_a_model_or_profile_runs_on_the_interpreter() {
        use crate::kernels::naming::{MACH_GFX90A, MACH_GFX942};
        let mut cfg = Config::default();
        let r = |name: &str, mach| Resolved { name: name.into(), model: None, mach };
        assert!(interprets(&cfg, &r("k", None)));
        assert_eq!(
            target(&r("k", None), Target::Gfx90a),
            Some(Target::Gfx90a),
            "a kernel the loader does not name is taken as the device's ISA"
        );
        assert_eq!(target(&r("k", None), Target::Gfx942), Some(Target::Gfx942));
        assert_eq!(
            target(&r("k", Some(MACH_GFX90A)), Target::Gfx942),
            Some(Target::Gfx90a),
            "the code object's machine first"
        );
        assert!(interprets(&cfg, &r("k", Some(MACH_GFX90A))));
        assert!(interprets(&cfg, &r("k", Some(MACH_GFX942))), "gfx942 code executes");
        assert_eq!(target(&r("k", Some(MACH_GFX942)), Target::Gfx90a), Some(Target::Gfx942));
        assert!(!interprets(&cfg, &r("k", Some(0x4f))), "gfx950 code stays timing-only");
        assert!(!interprets(&cfg, &r("k", Some(0x30))), "gfx908 code stays timing-only");
        cfg.kernels.push(crate::config::KernelProfile {
            name: "k".into(),
            wg_ns: 1,
            util: 0.0,
            hbm_bytes_per_wg: 0,
        });
        assert!(
            !interprets(&cfg, &r("k", Some(MACH_GFX90A))),
            "a [[kernel]] profile is timing-only"
        );
        let modelled = Resolved {
            name: "xhsa_vadd".into(),
            model: Registry::builtin().get("xhsa_vadd").copied(),
            mach: None,
        };
        assert!(!interprets(&Config::default(), &modelled));
    }
}
