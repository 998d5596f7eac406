//! The workload models: kernel sequences of one inference request as PyTorch eager mode on
//! ROCm (MIOpen convolutions, rocBLAS/hipBLASLt GEMMs, ATen elementwise kernels) would launch
//! them, with grids and per-workgroup times derived from layer shapes and MI308X figures.
//! `xhsa-bench models --write tools/workloads/models` regenerates the tables the workload
//! program replays; `docs/calibration.md` gives the source of every number below.
//!
//! Three kinds of kernel:
//! - **GEMM-class** (convolution as implicit GEMM, linear layers, batched matmul): workgroups of
//!   256 work-items holding their macro-tile's LDS footprint: the A and B panels of one K-depth
//!   stage, double-buffered, `(tm + tn) x depth x 4 B x 2` (64x64: 16 KiB, 4 per CU; 32x32:
//!   8 KiB, 8 per CU by wave slots), capped at [`Params::gemm_lds_max`] (32 KiB, 2 per CU) for
//!   the large tiles, which VGPRs/AGPRs limit to about 8 waves per CU (the emulator counts only
//!   wave slots and LDS, so that limit is expressed through LDS). The macro-tile and split-K
//!   factor are the ones with the shortest kernel in whole device rounds, and a workgroup
//!   computes `tm x tn x K` multiply-adds at a rate that grows with the tile's arithmetic
//!   intensity, divided among the workgroups of the kernel resident on its CU.
//! - **memory-bound** (batch norm in inference, ReLU, residual add, pooling, softmax, layer norm,
//!   GELU, copies): workgroups of 256 work-items, no LDS (8 per CU), moving their share of the
//!   tensor bytes at the CU's share of HBM bandwidth; large tensors are cut into rounds of at
//!   most [`Params::ew_round_ns`] so that the emulator's event rate stays bounded (a real
//!   elementwise grid has far more, shorter workgroups).
//! - the **naive matmul** of the users' 2048² task (one work-item per output, 16x16
//!   workgroups, no LDS), timed from their single-thread figure.
//!
//! Every kernel also carries a fixed cost (`kernel_fixed_ns`: dispatch, ramp-up and drain, the
//! dependent-launch gap of an in-order stream), because the emulator has no launch cost of its
//! own (see the model gaps in `docs/calibration.md`).
//!
//! GEMM-class and memory-bound kernels also get a contention profile
//! (docs/timing-model-contention.md, 4.1): a GEMM workgroup uses the fraction of its CU's MFMA
//! rate that its multiply-adds take over its run time (`MACs / (cu_macs_per_ns x wg_ns)`: the
//! stall cycles and fixed costs are left to other workgroups); a memory-bound workgroup uses
//! [`Params::ew_util`] of the pipe and moves its share of the kernel's bytes through HBM. GEMM
//! panel reads are mostly L2 hits and are not counted against HBM.

use crate::table::{Kernel, Table, CUS, LDS_PER_CU, WAVES_PER_CU};

/// Device and calibration figures. Defaults are the MI308X's; `eta_*` and `kernel_fixed_ns`
/// are the calibrated ones (docs/calibration.md).
#[derive(Clone, Debug)]
pub struct Params {
    /// fp32 MFMA multiply-adds per ns of one CU: 256 FLOP/clk x 2.1 GHz / 2.
    pub cu_macs_per_ns: f64,
    /// HBM bandwidth of the device, bytes per ns (5.3 TB/s).
    pub hbm_bytes_per_ns: f64,
    /// GEMM efficiency at infinite arithmetic intensity (the rest follows I / (I + I0)).
    pub eta_gemm: f64,
    /// Arithmetic intensity (MACs per element loaded) at which a tile reaches half of eta_gemm.
    pub i0: f64,
    /// Fraction of the HBM bandwidth memory-bound kernels reach.
    pub eta_bw: f64,
    /// Fixed cost of every kernel (ns), spread over its rounds.
    pub kernel_fixed_ns: f64,
    /// Fixed cost of every GEMM workgroup (prologue, epilogue: output write), ns.
    pub gemm_wg_fixed_ns: f64,
    /// Longest round of a memory-bound kernel (ns): bounds the workgroup length.
    pub ew_round_ns: f64,
    /// Host time of a PyTorch eager operator that runs an ATen kernel (Python, dispatcher, HIP
    /// launch), device ns.
    pub host_aten_ns: u64,
    /// Host time of a PyTorch eager operator that calls MIOpen (convolution, batch norm).
    pub host_miopen_ns: u64,
    /// K-depth of one LDS stage of a GEMM tile (Tensile's DepthU); two stages are resident.
    pub gemm_depth: u64,
    /// Largest GEMM LDS footprint: large tiles are held to 2 per CU (VGPR/AGPR-limited).
    pub gemm_lds_max: u64,
    /// CU pipe utilisation of one memory-bound workgroup (its waves mostly wait on memory).
    pub ew_util: f64,
}

impl Default for Params {
    fn default() -> Self {
        Params {
            cu_macs_per_ns: 256.0 * 2.1 / 2.0,
            hbm_bytes_per_ns: 5300.0,
            eta_gemm: 0.66,
            i0: 32.0,
            eta_bw: 0.70,
            kernel_fixed_ns: 4000.0,
            gemm_wg_fixed_ns: 2000.0,
            ew_round_ns: 20_000.0,
            gemm_depth: 16,
            gemm_lds_max: 32 * 1024,
            ew_util: 0.02,
            host_aten_ns: 30_000,
            host_miopen_ns: 45_750,
        }
    }
}

/// GEMM-class workgroup: 256 work-items.
pub const GEMM_THREADS: u32 = 256;
/// Memory-bound workgroup: 256 work-items, no LDS (8 per CU).
pub const EW_THREADS: u32 = 256;
const EW_PER_CU: u64 = 8;
/// Macro-tiles (MIOpen igemm / Tensile sizes).
/// Split-K factors (MIOpen's gemm_k_global_split, Tensile's GSU): partial sums of K slices.
const SPLIT_K: [u64; 4] = [1, 2, 4, 8];
/// Macro-tile of a decode step's skinny GEMM: 16 rows (the batch, padded to one MFMA block) by 64
/// columns: (16 + 64) x 16 x 4 B x 2 = 10 KiB of LDS, 6 per CU.
pub const GEMV_TILE: (u64, u64) = (16, 64);
/// Dense bf16/fp16 MFMA rate over the fp32 one of a CDNA3 CU: MI300X 1307.4 TFLOPS bf16 dense
/// against 163.4 TFLOPS fp32 matrix (AMD's MI300X data sheet); the MI308X has the same CU.
pub const BF16_MFMA_X: f64 = 8.0;
const TILES: [(u64, u64); 6] = [(256, 128), (128, 128), (128, 64), (64, 64), (64, 32), (32, 32)];

/// Builds kernel sequences.
pub struct Builder<'p> {
    p: &'p Params,
    kernels: Vec<Kernel>,
}

impl<'p> Builder<'p> {
    pub fn new(p: &'p Params) -> Self {
        Builder { p, kernels: Vec::new() }
    }

    /// A GEMM of `m x n` outputs over `k` (batched `batch` times).
    pub fn gemm(&mut self, label: &str, m: u64, n: u64, k: u64, batch: u64) {
        // The library's pick: the macro-tile and split-K factor with the shortest kernel (tuned
        // libraries time their candidates), counting rounds of the device.
        let plan = |(tm, tn): (u64, u64), split: u64| {
            let wgs = m.div_ceil(tm) * n.div_ceil(tn) * batch * split;
            let (lds, per_cu) = self.tile_residency(tm, tn);
            let intensity = (tm * tn) as f64 / (tm + tn) as f64;
            let eta = self.p.eta_gemm * intensity / (intensity + self.p.i0);
            // Workgroups of the kernel sharing a CU share its MFMA rate; a kernel too small to
            // fill its residency on every CU gives each workgroup a larger share.
            let share = wgs.div_ceil(CUS).clamp(1, per_cu) as f64;
            let rate = self.p.cu_macs_per_ns / share * eta;
            let rounds = wgs.div_ceil(CUS * per_cu);
            let macs = (tm * tn * k.div_ceil(split)) as f64;
            let wg = macs / rate + self.p.gemm_wg_fixed_ns + self.p.kernel_fixed_ns / rounds as f64;
            (wgs, wg, rounds as f64 * wg, macs, lds)
        };
        let (wgs, wg, _, macs, lds) = TILES
            .iter()
            .flat_map(|&t| SPLIT_K.iter().filter(move |&&s| k / s >= 64).map(move |&s| plan(t, s)))
            .min_by(|a, b| a.2.total_cmp(&b.2))
            .unwrap_or_else(|| plan(TILES[TILES.len() - 1], 1));
        let util = macs / (self.p.cu_macs_per_ns * wg);
        self.push_profiled(label, wgs, GEMM_THREADS, lds as u32, wg, util, 0.0);
    }

    /// LDS bytes of a `tm x tn` GEMM workgroup and how many fit on one CU.
    fn tile_residency(&self, tm: u64, tn: u64) -> (u64, u64) {
        let lds = ((tm + tn) * self.p.gemm_depth * 4 * 2).min(self.p.gemm_lds_max);
        let by_waves = u64::from(WAVES_PER_CU / GEMM_THREADS.div_ceil(64));
        (lds, (u64::from(LDS_PER_CU) / lds).min(by_waves))
    }

    /// A convolution as implicit GEMM: batch `nb`, `cin -> cout`, `kh x kw` filter, output
    /// `ho x wo`.
    #[allow(clippy::too_many_arguments)]
    pub fn conv(
        &mut self,
        label: &str,
        nb: u64,
        cin: u64,
        cout: u64,
        kh: u64,
        kw: u64,
        ho: u64,
        wo: u64,
    ) {
        self.gemm(label, nb * ho * wo, cout, cin * kh * kw, 1);
    }

    /// A memory-bound kernel over `elements` fp32 elements moving `bytes` bytes.
    pub fn mem(&mut self, label: &str, elements: u64, bytes: u64) {
        let slots = CUS * EW_PER_CU;
        let busy = bytes as f64 / (self.p.hbm_bytes_per_ns * self.p.eta_bw);
        // The real grid: 4 elements per work-item.
        let real = elements.div_ceil(u64::from(EW_THREADS) * 4).max(1);
        let rounds = ((busy / self.p.ew_round_ns).ceil() as u64).max(1);
        let wgs = real.min(slots * rounds);
        let rounds = wgs.div_ceil(slots);
        let wg = busy / rounds as f64 + self.p.kernel_fixed_ns / rounds as f64;
        // HBM demand per workgroup: the kernel's bytes over its rounds at full residency, so
        // that it streams at most bytes / (rounds x wg) = busy / (busy + fixed) of the
        // bandwidth, as its calibrated time says. (bytes / wgs would oversubscribe HBM alone
        // when the last round is partial: the full rounds would move more than their share.)
        let per_wg = bytes as f64 / (rounds * wgs.min(slots)) as f64;
        self.push_profiled(label, wgs, EW_THREADS, 0, wg, self.p.ew_util, per_wg);
    }

    /// A skinny GEMM of a decode step: `m` tokens (m <= 16) through `n x k` bf16 weights. It is
    /// memory-bound on its weight reads (`n x k x 2` B), like a memory-bound kernel, but its
    /// workgroups hold a small MFMA tile's LDS ([`GEMV_TILE`]: the activation panel and a
    /// weight panel per K stage), as hipBLASLt's small-M kernels and vLLM's ROCm skinny GEMMs do.
    /// The weights are split over `n / tn` column panels and split-K slices of 256, cut to at
    /// most [`Params::ew_round_ns`] per round; the CU pipe use is its MACs over its run time at
    /// the builder's MFMA rate (at least [`Params::ew_util`]).
    pub fn gemv(&mut self, label: &str, m: u64, n: u64, k: u64) {
        let bytes = (n * k + m * k + m * n) * 2;
        let (lds, per_cu) = self.tile_residency(GEMV_TILE.0, GEMV_TILE.1);
        let slots = CUS * per_cu;
        let busy = bytes as f64 / (self.p.hbm_bytes_per_ns * self.p.eta_bw);
        let real = n.div_ceil(GEMV_TILE.1) * (k / 256).max(1);
        let rounds = ((busy / self.p.ew_round_ns).ceil() as u64).max(1);
        let wgs = real.min(slots * rounds);
        let rounds = wgs.div_ceil(slots);
        let wg = busy / rounds as f64 + self.p.kernel_fixed_ns / rounds as f64;
        let per_wg = bytes as f64 / (rounds * wgs.min(slots)) as f64;
        let macs = (m * n * k) as f64 / wgs as f64;
        let util = (macs / (self.p.cu_macs_per_ns * wg)).max(self.p.ew_util);
        self.push_profiled(label, wgs, GEMM_THREADS, lds as u32, wg, util, per_wg);
    }

    /// Any kernel, given directly, without a contention profile.
    pub fn push(&mut self, label: &str, wgs: u64, threads: u32, lds: u32, wg_ns: f64) {
        self.push_profiled(label, wgs, threads, lds, wg_ns, 0.0, 0.0);
    }

    /// A kernel whose workgroups each use `util` of their CU's pipe and move `bytes` of HBM.
    #[allow(clippy::too_many_arguments)]
    pub fn push_profiled(
        &mut self,
        label: &str,
        wgs: u64,
        threads: u32,
        lds: u32,
        wg_ns: f64,
        util: f64,
        bytes: f64,
    ) {
        self.kernels.push(Kernel {
            label: label.to_string(),
            workgroups: wgs.max(1),
            threads,
            lds,
            wg_ns: (wg_ns.round() as u64).max(1),
            host_ns: 0,
            util_permille: (util * 1000.0).round().clamp(0.0, 1000.0) as u32,
            bytes_per_wg: bytes.round() as u64,
        });
    }

    pub fn finish(self, model: &str, items: u32, unit: &str) -> Table {
        Table { model: model.to_string(), items, unit: unit.to_string(), kernels: self.kernels }
    }
}

/// torchvision ResNet-18 (`bottleneck = false`, blocks 2-2-2-2) or ResNet-50 (`true`, 3-4-6-3),
/// 224x224 input, eval mode, as PyTorch eager launches it on ROCm: every convolution one MIOpen
/// kernel, every batch norm one inference kernel, ReLU and the residual add separate in-place
/// elementwise kernels, max pool, adaptive average pool, and the classifier's GEMM (bias in its
/// epilogue).
pub fn resnet(p: &Params, name: &str, batch: u64, bottleneck: bool) -> Table {
    let blocks: [u64; 4] = if bottleneck { [3, 4, 6, 3] } else { [2, 2, 2, 2] };
    let expansion = if bottleneck { 4 } else { 1 };
    let mut b = Builder::new(p);
    let n = batch;
    // Stem: conv 7x7/2 3->64 at 112x112, BN, ReLU, max pool 3x3/2 to 56x56.
    let act = |c: u64, h: u64| n * c * h * h;
    b.conv("conv1", n, 3, 64, 7, 7, 112, 112);
    b.mem("bn1", act(64, 112), act(64, 112) * 8);
    b.mem("relu1", act(64, 112), act(64, 112) * 8);
    b.mem("maxpool", act(64, 56), (act(64, 112) + act(64, 56)) * 4);
    let mut cin = 64;
    let mut h = 56;
    for (stage, &nblocks) in blocks.iter().enumerate() {
        let width = 64 << stage;
        let cout = width * expansion;
        for blk in 0..nblocks {
            let stride = if stage > 0 && blk == 0 { 2 } else { 1 };
            let ho = h / stride;
            let tag = format!("l{}.{}", stage + 1, blk);
            if bottleneck {
                b.conv(&format!("{tag}.conv1"), n, cin, width, 1, 1, h, h);
                b.mem(&format!("{tag}.bn1"), act(width, h), act(width, h) * 8);
                b.mem(&format!("{tag}.relu1"), act(width, h), act(width, h) * 8);
                b.conv(&format!("{tag}.conv2"), n, width, width, 3, 3, ho, ho);
                b.mem(&format!("{tag}.bn2"), act(width, ho), act(width, ho) * 8);
                b.mem(&format!("{tag}.relu2"), act(width, ho), act(width, ho) * 8);
                b.conv(&format!("{tag}.conv3"), n, width, cout, 1, 1, ho, ho);
                b.mem(&format!("{tag}.bn3"), act(cout, ho), act(cout, ho) * 8);
            } else {
                b.conv(&format!("{tag}.conv1"), n, cin, width, 3, 3, ho, ho);
                b.mem(&format!("{tag}.bn1"), act(width, ho), act(width, ho) * 8);
                b.mem(&format!("{tag}.relu1"), act(width, ho), act(width, ho) * 8);
                b.conv(&format!("{tag}.conv2"), n, width, width, 3, 3, ho, ho);
                b.mem(&format!("{tag}.bn2"), act(width, ho), act(width, ho) * 8);
            }
            if stride != 1 || cin != cout {
                b.conv(&format!("{tag}.down"), n, cin, cout, 1, 1, ho, ho);
                b.mem(&format!("{tag}.down_bn"), act(cout, ho), act(cout, ho) * 8);
            }
            b.mem(&format!("{tag}.add"), act(cout, ho), act(cout, ho) * 12);
            b.mem(&format!("{tag}.relu"), act(cout, ho), act(cout, ho) * 8);
            cin = cout;
            h = ho;
        }
    }
    b.mem("avgpool", n * cin, act(cin, h) * 4 + n * cin * 4);
    b.gemm("fc", n, 1000, cin, 1);
    b.finish(name, batch as u32, "img")
}

/// BERT-base (12 layers, hidden 768, 12 heads, FFN 3072), `batch` sequences of `seq` tokens,
/// Hugging Face `BertModel` in PyTorch eager mode, fp32, scaled-dot-product attention on its
/// math path (fp32 has no fused kernel on ROCm): embeddings (3 gathers, 2 adds, layer norm),
/// per layer Q/K/V GEMMs, scale, Q·Kᵀ, mask add, softmax, P·V, head merge copy, output GEMM,
/// residual add, layer norm, FFN GEMM, GELU, FFN GEMM, residual add, layer norm; pooler GEMM and
/// tanh.
pub fn bert(p: &Params, name: &str, batch: u64, seq: u64) -> Table {
    let (hid, heads, ffn, layers) = (768u64, 12u64, 3072u64, 12);
    let t = batch * seq;
    let dh = hid / heads;
    let mut b = Builder::new(p);
    let x = t * hid;
    for e in ["emb.word", "emb.type", "emb.pos"] {
        b.mem(e, x, x * 8);
    }
    b.mem("emb.add1", x, x * 12);
    b.mem("emb.add2", x, x * 12);
    b.mem("emb.ln", x, x * 8);
    for l in 0..layers {
        let tag = format!("L{l}");
        for m in ["q", "k", "v"] {
            b.gemm(&format!("{tag}.{m}"), t, hid, hid, 1);
        }
        b.mem(&format!("{tag}.scale"), x, x * 8);
        let scores = batch * heads * seq * seq;
        b.gemm(&format!("{tag}.qk"), seq, seq, dh, batch * heads);
        b.mem(&format!("{tag}.mask"), scores, scores * 12);
        b.mem(&format!("{tag}.softmax"), scores, scores * 8);
        b.gemm(&format!("{tag}.pv"), seq, dh, seq, batch * heads);
        b.mem(&format!("{tag}.merge"), x, x * 8);
        b.gemm(&format!("{tag}.o"), t, hid, hid, 1);
        b.mem(&format!("{tag}.add1"), x, x * 12);
        b.mem(&format!("{tag}.ln1"), x, x * 8);
        b.gemm(&format!("{tag}.ffn1"), t, ffn, hid, 1);
        b.mem(&format!("{tag}.gelu"), t * ffn, t * ffn * 8);
        b.gemm(&format!("{tag}.ffn2"), t, hid, ffn, 1);
        b.mem(&format!("{tag}.add2"), x, x * 12);
        b.mem(&format!("{tag}.ln2"), x, x * 8);
    }
    b.gemm("pooler", batch, hid, hid, 1);
    b.mem("pooler.tanh", batch * hid, batch * hid * 8);
    b.finish(name, batch as u32, "seq")
}

/// Shapes of a Llama-family decoder (the fields of its Hugging Face `config.json`).
#[derive(Clone, Copy, Debug)]
pub struct Llama {
    pub layers: u64,
    pub hidden: u64,
    pub heads: u64,
    pub kv_heads: u64,
    pub ffn: u64,
    pub vocab: u64,
}

/// Meta Llama-3-8B / 3.1-8B: 32 layers, hidden 4096, 32 query heads and 8 KV heads of 128
/// (grouped-query attention), SwiGLU FFN 14336, vocabulary 128256: 7.5 G parameters in the
/// layers and the LM head (15.0 GB in bf16), untied embeddings.
pub const LLAMA3_8B: Llama =
    Llama { layers: 32, hidden: 4096, heads: 32, kv_heads: 8, ffn: 14336, vocab: 128256 };

/// Meta Llama-3.2-1B: 16 layers, hidden 2048, 32 query heads and 8 KV heads of 64, FFN 8192,
/// vocabulary 128256, embeddings tied to the LM head: 1.24 G parameters.
pub const LLAMA32_1B: Llama =
    Llama { layers: 16, hidden: 2048, heads: 32, kv_heads: 8, ffn: 8192, vocab: 128256 };

impl Llama {
    /// Head dimension.
    pub fn dh(&self) -> u64 {
        self.hidden / self.heads
    }

    /// Output width of the fused Q/K/V projection.
    pub fn qkv(&self) -> u64 {
        self.hidden + 2 * self.kv_heads * self.dh()
    }

    /// Parameters of one decoder layer (4 projections, 3 FFN matrices, 2 RMSNorm weights).
    pub fn layer_params(&self) -> u64 {
        let h = self.hidden;
        h * self.qkv() + h * h + 3 * h * self.ffn + 2 * h
    }
}

/// The builder's figures for bf16 kernels: [`BF16_MFMA_X`] times the fp32 MFMA rate; the LDS
/// footprint of a tile stays as computed (16-deep stages of 4 B hold the 32-deep stages of 2 B
/// that Tensile/hipBLASLt use for bf16).
pub fn bf16(p: &Params) -> Params {
    Params { cu_macs_per_ns: p.cu_macs_per_ns * BF16_MFMA_X, ..p.clone() }
}

/// vLLM's sampler at the end of a step, over `rows x vocab` logits: to fp32 with temperature,
/// softmax, and the sampling kernel (exponential race / argmax to one token id per row).
fn sampling(b: &mut Builder, rows: u64, vocab: u64) {
    let x = rows * vocab;
    b.mem("logits_f32", x, x * 6);
    b.mem("softmax", x, x * 8);
    b.mem("sample", x, x * 4);
}

/// Which pass a Llama layer's forward kernels belong to ([`layer_forward`]).
#[derive(Copy, Clone)]
enum Pass {
    /// vLLM's prefill of `batch` prompts of `seq` tokens: GEMM projections, the KV-cache write,
    /// FlashAttention.
    Prefill { batch: u64, seq: u64 },
    /// vLLM's decode step with KV caches of `ctx` tokens: skinny-GEMM projections, the cache
    /// write, paged attention reading each sequence's cache.
    Decode { ctx: u64 },
    /// PyTorch's training forward of `batch` sequences of `seq` tokens: GEMM projections and
    /// FlashAttention, no cache.
    Train { batch: u64, seq: u64 },
}

/// The forward kernels of one Llama layer `tag` over `rows` token rows (the prompts' or
/// sequences' tokens, or the decode batch): RMSNorm, fused Q/K/V, rotary, the KV-cache write
/// (serving only), attention, O, residual add, RMSNorm, gate and up, SiLU·mul, down, residual
/// add.
fn layer_forward(b: &mut Builder, tag: &str, m: &Llama, rows: u64, pass: Pass) {
    let (h, dh, kv, f) = (m.hidden, m.dh(), m.kv_heads * m.dh(), m.ffn);
    let x = rows * h;
    let proj = |b: &mut Builder, name: &str, n: u64, k: u64| match pass {
        Pass::Decode { .. } => b.gemv(&format!("{tag}.{name}"), rows, n, k),
        _ => b.gemm(&format!("{tag}.{name}"), rows, n, k, 1),
    };
    b.mem(&format!("{tag}.norm1"), x, x * 4);
    proj(b, "qkv", m.qkv(), h);
    b.mem(&format!("{tag}.rope"), rows * (h + kv), rows * (h + kv) * 4);
    if !matches!(pass, Pass::Train { .. }) {
        b.mem(&format!("{tag}.kv_write"), rows * 2 * kv, rows * 2 * kv * 4);
    }
    match pass {
        Pass::Prefill { batch, seq } | Pass::Train { batch, seq } => {
            b.gemm(&format!("{tag}.attn"), seq, dh, seq, batch * m.heads)
        }
        Pass::Decode { ctx } => {
            let cache = rows * ctx * 2 * kv;
            b.mem(&format!("{tag}.attn"), cache, cache * 2 + x * 4)
        }
    }
    proj(b, "o", h, h);
    b.mem(&format!("{tag}.add1"), x, x * 6);
    b.mem(&format!("{tag}.norm2"), x, x * 4);
    proj(b, "gate", f, h);
    proj(b, "up", f, h);
    b.mem(&format!("{tag}.act"), rows * f, rows * f * 6);
    // Training names it apart from the backward pass's own `down` kernels.
    let down = if matches!(pass, Pass::Train { .. }) { "ffn_down" } else { "down" };
    proj(b, down, h, f);
    b.mem(&format!("{tag}.add2"), x, x * 6);
}

/// One prefill of a Llama-family model as vLLM on ROCm runs it (bf16, hipBLASLt GEMMs, a fused
/// FlashAttention kernel, vLLM's own RMSNorm/rotary/cache/activation kernels, no fusion
/// between them): `batch` prompts of `seq` tokens. Embedding gather; per layer RMSNorm, fused
/// Q/K/V GEMM, rotary, KV-cache write, causal attention (one kernel: Q·Kᵀ and P·V over half the
/// positions), O GEMM, residual add, RMSNorm, gate and up GEMMs, SiLU·mul, down GEMM, residual
/// add; final RMSNorm, the LM head for the last token of each prompt only (a skinny GEMM over
/// the whole 1 GB head) and the sampler. A request's first token comes out of it.
pub fn llama_prefill(p: &Params, name: &str, m: &Llama, batch: u64, seq: u64) -> Table {
    let p16 = bf16(p);
    let mut b = Builder::new(&p16);
    let t = batch * seq;
    let h = m.hidden;
    b.mem("embed", t * h, t * h * 4);
    for l in 0..m.layers {
        layer_forward(&mut b, &format!("L{l}"), m, t, Pass::Prefill { batch, seq });
    }
    b.mem("norm_f", t * h, t * h * 4);
    b.gemv("lm_head", batch, m.vocab, h);
    sampling(&mut b, batch, m.vocab);
    b.finish(name, batch as u32, "req")
}

/// One decode step of a Llama-family model under vLLM on ROCm: the running batch of `batch`
/// sequences, each producing one token, whose KV caches hold `ctx` tokens on average. The same
/// 13 kernels per layer as the prefill, with every projection a skinny GEMM ([`Builder::gemv`]:
/// memory-bound on its weights) and decode attention (paged attention: each sequence's K and
/// V cache read once); then the final norm, the LM head and the sampler. The step reads every
/// weight once: its time is the weight bytes at the HBM rate plus each kernel's fixed cost.
pub fn llama_decode(p: &Params, name: &str, m: &Llama, batch: u64, ctx: u64) -> Table {
    let p16 = bf16(p);
    let mut b = Builder::new(&p16);
    let h = m.hidden;
    let x = batch * h;
    b.mem("embed", x, x * 4);
    for l in 0..m.layers {
        layer_forward(&mut b, &format!("L{l}"), m, batch, Pass::Decode { ctx });
    }
    b.mem("norm_f", x, x * 4);
    b.gemv("lm_head", batch, m.vocab, h);
    sampling(&mut b, batch, m.vocab);
    b.finish(name, batch as u32, "tok")
}

/// One training iteration of a Llama-family model in PyTorch eager mode on ROCm: bf16 compute,
/// hipBLASLt GEMMs, fused FlashAttention forward and backward, `batch` sequences of `seq`
/// tokens. Forward: embedding, per layer the prefill's kernels less the cache write (12), final
/// norm, LM head over every token, cross-entropy. Backward, per layer in reverse: for each
/// projection a data-gradient and a weight-gradient GEMM, SiLU·mul, RMSNorm, rotary and
/// attention backward, the sums of the residual and of the gate/up input gradients (18); the
/// LM head's two GEMMs and the embedding's scatter-add. Then AdamW (PyTorch's fused kernel, one
/// launch per layer and one for the tied embedding): fp32 master weights and moments, bf16
/// gradients, 28 B of HBM traffic per parameter.
pub fn llama_train(p: &Params, name: &str, m: &Llama, batch: u64, seq: u64) -> Table {
    let p16 = bf16(p);
    let mut b = Builder::new(&p16);
    let t = batch * seq;
    let (h, dh, kv, f, v) = (m.hidden, m.dh(), m.kv_heads * m.dh(), m.ffn, m.vocab);
    b.mem("embed", t * h, t * h * 4);
    for l in 0..m.layers {
        layer_forward(&mut b, &format!("L{l}"), m, t, Pass::Train { batch, seq });
    }
    b.mem("norm_f", t * h, t * h * 4);
    b.gemm("lm_head", t, v, h, 1);
    b.mem("loss", t * v, t * v * 6);
    b.mem("loss.bwd", t * v, t * v * 6);
    b.gemm("lm_head.dgrad", t, h, v, 1);
    b.gemm("lm_head.wgrad", h, v, t, 1);
    b.mem("norm_f.bwd", t * h, t * h * 8);
    for l in (0..m.layers).rev() {
        let tag = format!("L{l}");
        b.gemm(&format!("{tag}.ffn_down.dgrad"), t, f, h, 1);
        b.gemm(&format!("{tag}.ffn_down.wgrad"), h, f, t, 1);
        b.mem(&format!("{tag}.act.bwd"), t * f, t * f * 10);
        for g in ["up", "gate"] {
            b.gemm(&format!("{tag}.{g}.dgrad"), t, h, f, 1);
            b.gemm(&format!("{tag}.{g}.wgrad"), f, h, t, 1);
        }
        b.mem(&format!("{tag}.ffn_in.sum"), t * h, t * h * 6);
        b.mem(&format!("{tag}.norm2.bwd"), t * h, t * h * 8);
        b.mem(&format!("{tag}.add1.bwd"), t * h, t * h * 6);
        b.gemm(&format!("{tag}.o.dgrad"), t, h, h, 1);
        b.gemm(&format!("{tag}.o.wgrad"), h, h, t, 1);
        // FlashAttention backward: about 2.5 times the forward's multiply-adds.
        b.gemm(&format!("{tag}.attn.bwd"), seq, dh, seq * 5 / 2, batch * m.heads);
        b.mem(&format!("{tag}.rope.bwd"), t * (h + kv), t * (h + kv) * 4);
        b.gemm(&format!("{tag}.qkv.dgrad"), t, h, m.qkv(), 1);
        b.gemm(&format!("{tag}.qkv.wgrad"), m.qkv(), h, t, 1);
        b.mem(&format!("{tag}.norm1.bwd"), t * h, t * h * 8);
        b.mem(&format!("{tag}.add0.bwd"), t * h, t * h * 6);
    }
    b.mem("embed.bwd", t * h, t * h * 4);
    let adam = |b: &mut Builder, label: &str, params: u64| b.mem(label, params, params * 28);
    for l in 0..m.layers {
        adam(&mut b, &format!("L{l}.adamw"), m.layer_params());
    }
    adam(&mut b, "embed.adamw", v * h + h);
    b.finish(name, t as u32, "tok")
}

/// The users' matmul task: `kernels` naive `n x n` fp32 matmuls (one work-item per output,
/// 16x16 workgroups, no LDS), each taking `kernel_ns` on the whole GPU (their single-thread
/// figure: P50 475 ms for 30 kernels).
pub fn matmul_task(name: &str, n: u64, kernels: usize, kernel_ns: f64) -> Table {
    let wgs = (n / 16) * (n / 16);
    let rounds = wgs.div_ceil(CUS * 8);
    let p = Params::default();
    let mut b = Builder::new(&p);
    for i in 0..kernels {
        b.push(&format!("matmul{i}"), wgs, 256, 0, kernel_ns / rounds as f64);
    }
    b.finish(name, 1, "task")
}

/// Names of the built-in models.
pub const NAMES: [&str; 8] = [
    "resnet18_bs8",
    "resnet50_bs8",
    "resnet50_bs1024",
    "bert_base",
    "matmul2048_task",
    "llama3_8b_prefill",
    "llama3_8b_decode_bs8",
    "llama32_1b_train",
];

/// Prompt length of the `llama3_8b_prefill` request (one prompt per request).
pub const LLM_PROMPT: u64 = 512;
/// Mean KV-cache length of the `llama3_8b_decode_bs8` step's sequences: prompts of 512 tokens
/// plus a mean of 128 generated.
pub const LLM_CTX: u64 = 640;

/// How a model's host issues its kernels.
enum Host {
    /// None (the users' matmul task: its kernels are launched back to back).
    None,
    /// PyTorch eager: [`Params::host_aten_ns`] per operator, [`Params::host_miopen_ns`] for
    /// those that call MIOpen.
    Eager,
    /// PyTorch eager without MIOpen (a transformer): [`Params::host_aten_ns`] for every kernel.
    Aten,
    /// An LLM server's step (vLLM with HIP graphs or a C++ runtime): the launch only, taken as
    /// the tables' launch overhead [`Params::kernel_fixed_ns`].
    Served,
}

/// A built-in model by name.
pub fn build(name: &str, p: &Params) -> Option<Table> {
    let (mut t, host) = match name {
        "resnet18_bs8" => (resnet(p, name, 8, false), Host::Eager),
        "resnet50_bs8" => (resnet(p, name, 8, true), Host::Eager),
        "resnet50_bs1024" => (resnet(p, name, 1024, true), Host::Eager),
        "bert_base" => (bert(p, name, 1, 128), Host::Eager),
        "matmul2048_task" => (matmul_task(name, 2048, 30, 475.0e6 / 30.0), Host::None),
        "llama3_8b_prefill" => (llama_prefill(p, name, &LLAMA3_8B, 1, LLM_PROMPT), Host::Served),
        "llama3_8b_decode_bs8" => (llama_decode(p, name, &LLAMA3_8B, 8, LLM_CTX), Host::Served),
        "llama32_1b_train" => (llama_train(p, name, &LLAMA32_1B, 2, 2048), Host::Aten),
        _ => return None,
    };
    for k in &mut t.kernels {
        k.host_ns = match host {
            Host::None => 0,
            Host::Eager if is_miopen(&k.label) => p.host_miopen_ns,
            Host::Eager | Host::Aten => p.host_aten_ns,
            Host::Served => p.kernel_fixed_ns.round() as u64,
        };
    }
    Some(t)
}

/// Operators PyTorch hands to MIOpen (convolution, batch norm): their host path includes
/// MIOpen's problem lookup and solver invocation.
fn is_miopen(label: &str) -> bool {
    let last = label.rsplit('.').next().unwrap_or(label);
    last.starts_with("conv") || last.starts_with("bn") || last == "down" || last == "down_bn"
}

/// The comment block of a generated table.
pub fn header(name: &str, p: &Params) -> String {
    format!(
        "{name}: generated by `xhsa-bench models --write` from tools/bench/src/models.rs; sources in docs/calibration.md.\n\
         Device: 80 CUs x 32 wave slots, 64 KiB LDS per CU; GEMM workgroups 256 work-items + their tile's LDS\n\
         ((tm+tn) x depth {} x 4 B x 2, at most {} B), memory-bound workgroups 256 work-items (8 per CU).\n\
         Params: fp32 MFMA {:.1} MAC/ns per CU, eta_gemm {}, I0 {},\n\
         HBM {} B/ns x eta_bw {}, kernel fixed {} ns, GEMM workgroup fixed {} ns, memory-bound round <= {} ns.\n\
         Contention profile (last two columns): GEMM util = MACs / (MFMA rate x wg_ns), memory-bound util {}, bytes per workgroup.",
        p.gemm_depth, p.gemm_lds_max, p.cu_macs_per_ns, p.eta_gemm, p.i0, p.hbm_bytes_per_ns, p.eta_bw, p.kernel_fixed_ns, p.gemm_wg_fixed_ns, p.ew_round_ns, p.ew_util
    ) + &if name.starts_with("llama") {
        format!(
            "\nbf16: MFMA x {BF16_MFMA_X} ({:.1} MAC/ns per CU); decode-step projections are skinny GEMMs: {}x{} tiles, memory-bound on their weights.\n\
             Host time per kernel: {}.",
            p.cu_macs_per_ns * BF16_MFMA_X,
            GEMV_TILE.0,
            GEMV_TILE.1,
            if name.ends_with("_train") {
                "PyTorch eager, host_aten_ns".to_string()
            } else {
                format!("the launch only (an LLM server's step), kernel fixed {} ns", p.kernel_fixed_ns)
            }
        )
    } else {
        String::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kernel_counts_match_a_pytorch_trace() {
        let p = Params::default();
        let count = |n: &str| build(n, &p).unwrap().kernels.len();
        // conv 20 + BN 20 + ReLU 17 + add 8 + maxpool + avgpool + fc.
        assert_eq!(count("resnet18_bs8"), 68);
        // conv 53 + BN 53 + ReLU 49 + add 16 + maxpool + avgpool + fc.
        assert_eq!(count("resnet50_bs8"), 174);
        assert_eq!(count("resnet50_bs1024"), 174);
        // embeddings 6 + 12 x 17 + pooler 2.
        assert_eq!(count("bert_base"), 212);
        assert_eq!(count("matmul2048_task"), 30);
        // embedding + 32 x 13 + final norm, LM head, 3 sampler kernels.
        assert_eq!(count("llama3_8b_prefill"), 422);
        assert_eq!(count("llama3_8b_decode_bs8"), 422);
        // forward 1 + 16 x 12 + 3; backward 4 + 16 x 18 + 1; AdamW 16 + 1.
        assert_eq!(count("llama32_1b_train"), 506);
    }

    #[test]
    fn a_decode_step_reads_the_weights_at_the_hbm_rate() {
        let p = Params::default();
        let t = build("llama3_8b_decode_bs8", &p).unwrap();
        let m = LLAMA3_8B;
        let weights = (m.layers * m.layer_params() + m.vocab * m.hidden) * 2;
        // 15.0 GB of bf16 weights, each projection's bytes spread over its workgroups.
        assert!((weights as f64 / 1e9 - 15.0).abs() < 0.1, "{weights}");
        let gemv: Vec<&Kernel> = t.kernels.iter().filter(|k| k.lds > 0).collect();
        assert_eq!(gemv.len(), 32 * 5 + 1);
        let moved: u64 = gemv.iter().map(|k| k.bytes_per_wg * k.workgroups).sum();
        assert!((moved as f64 / weights as f64 - 1.0).abs() < 0.01, "{moved} vs {weights}");
        // Step time: weights at 5.3 TB/s x 0.70 plus 4 us per kernel, and the small kernels.
        let floor = weights as f64 / (p.hbm_bytes_per_ns * p.eta_bw) + 422.0 * p.kernel_fixed_ns;
        let ms = t.alone_ns() as f64 / 1e6;
        assert!(ms > floor / 1e6 && ms < floor / 1e6 * 1.1, "{ms} ms vs floor {}", floor / 1e6);
        // Every kernel but the LM head and the sampler is one of 5-50 us; host 4 us each.
        for k in &t.kernels[..t.kernels.len() - 4] {
            let us = crate::table::alone_ns(k) as f64 / 1e3;
            assert!((4.0..=50.0).contains(&us), "{} {us} us", k.label);
            assert_eq!(k.host_ns, 4000, "{}", k.label);
        }
    }

    #[test]
    fn the_training_iteration_is_gemm_bound_and_issued_by_pytorch_eager() {
        let p = Params::default();
        let t = build("llama32_1b_train", &p).unwrap();
        assert_eq!(t.items, 4096);
        assert!(t.kernels.iter().all(|k| k.host_ns == p.host_aten_ns));
        let gemm: u64 = t.kernels.iter().filter(|k| k.lds > 0).map(crate::table::alone_ns).sum();
        assert!(gemm as f64 > 0.7 * t.gpu_ns() as f64, "{gemm} of {}", t.gpu_ns());
        assert!(t.gpu_ns() > t.host_ns());
    }

    #[test]
    fn gemm_tiles_hold_their_footprint_of_lds() {
        let p = Params::default();
        let b = Builder::new(&p);
        // (tm + tn) x 16 x 4 B x 2 stages; large tiles capped at 32 KiB (2 per CU).
        assert_eq!(b.tile_residency(64, 64), (16384, 4));
        assert_eq!(b.tile_residency(128, 64), (24576, 2));
        assert_eq!(b.tile_residency(256, 128), (32768, 2));
        // 32x32: 8 KiB, 8 per CU by LDS and by wave slots (4 waves each).
        assert_eq!(b.tile_residency(32, 32), (8192, 8));
    }

    #[test]
    fn matmul_task_takes_the_users_time_alone() {
        let t = build("matmul2048_task", &Params::default()).unwrap();
        let ms = t.alone_ns() as f64 / 1e6;
        assert!((ms - 475.0).abs() < 5.0, "{ms}");
    }

    #[test]
    fn shipped_tables_are_the_generated_ones() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../workloads/models");
        let p = Params::default();
        for n in NAMES {
            let t = build(n, &p).unwrap();
            let text = std::fs::read_to_string(dir.join(format!("{n}.kernels"))).unwrap();
            assert_eq!(Table::parse(&text).unwrap(), t, "{n}: run `xhsa-bench models --write`");
        }
    }
}
