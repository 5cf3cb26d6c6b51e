-- tandem.experiment: the experiment schema, and resolve(), which turns the table an
-- experiment file returns, plus the command line's key=value overrides, into a
-- complete, validated experiment with its model built.
--
-- This file is the one source of truth for every key an experiment may hold, its
-- kind, its default and its range. engine/script/experiment_fields.cpp names the
-- ExperimentConfig member (engine/train/config.hpp) each key sets, and
-- tests/unit/test_schema_agreement.cpp fails when the two disagree on a key, a kind
-- or a default: a key added to M.schema needs its line there too. A key not in the
-- schema is an error that names it (and the nearest known key), never a silent
-- default, so a typo cannot quietly train something else; the same holds for
-- model_args keys the model never reads. Settings that must agree with each other
-- (a global batch of at least one sample per worker, a fixed plan that adds up and
-- fits every worker's memory, one entry per worker in every per-worker list) are
-- checked in resolve(), which the launcher runs before it starts any rank: a
-- mistake costs no mpirun.
--
-- A table can be given whole on the command line as a Lua table constructor
-- ('faults={{rank = 1, iteration = 20}}'), evaluated with no globals.
--
-- Mistakes in the user's input are raised as "user error" tables {message, hint,
-- where} (see engine/script/lua_state.hpp): the engine prints them without a
-- traceback of this file. Errors inside a model file stay ordinary Lua errors, with
-- the model file's line and a traceback.
local nn = require 'tandem.nn'

local M = {}

-- Schema nodes. kind: number | integer | string | boolean | array (a non-empty list
-- of positive integers) | record (named fields) | free (any table, passed through).
-- Checks: min, max (inclusive), gt, lt (exclusive), one_of. default = nil means the
-- key is optional and unset unless given (required = true: it must be given).
local function number(default, t) t = t or {}; t.kind = 'number'; t.default = default; return t end
local function integer(default, t) t = t or {}; t.kind = 'integer'; t.default = default; return t end
local function string_(default, t) t = t or {}; t.kind = 'string'; t.default = default; return t end
local function boolean(default, t) t = t or {}; t.kind = 'boolean'; t.default = default; return t end
local function array(default, t) t = t or {}; t.kind = 'array'; t.default = default; return t end
local function record(fields, t) t = t or {}; t.kind = 'record'; t.fields = fields; return t end
local function free(t) t = t or {}; t.kind = 'free'; t.default = t.default or {}; return t end
-- list: any number of values of one kind (item), e.g. per-worker settings.
local function list(item, t) t = t or {}; t.kind = 'list'; t.item = item; return t end

local MAX_SEED = 2 ^ 53  -- seeds are exact in a double up to here
-- Every integer is exact in a double, and fits an int64, up to 2^53: check_value
-- refuses larger ones for every integer key. Keys read into a C++ int (32 bits) go
-- no further than MAX_INT (test_schema_agreement checks each has such a max).
local MAX_INTEGER = 2 ^ 53
local MAX_INT = 2 ^ 31 - 1
-- Emulated speeds (emulation.reference, speeds, slowdowns) multiply each other, and a
-- step's emulated time divides by their product. A speed of a millionth is an
-- emulated hang (tests use one; the emulator refuses a step longer than a day); the
-- reference is the device's share of a core and stays a real fraction of one.
local MIN_SPEED = 1e-6
local MAX_SPEED = 1e3
local MIN_REFERENCE = 1e-3

M.schema = record {
  name = string_(nil, { doc = 'run name; default: the experiment file name without .lua' }),
  model = string_(nil, { required = true,
                         doc = 'a model under models/ (mlp, lenet), or a path to a model .lua file' }),
  model_args = free { doc = 'passed to the model function, next to input and classes' },
  data = record {
    name = string_('fashion-mnist', { one_of = { 'fashion-mnist', 'synthetic', 'text', 'tokens', 'cifar10' },
                                      doc = 'text: byte-level text for a language model (model = \'gpt\'); '
                                         .. "tokens: nanoGPT's or llm.c's token files (model = 'gpt')" }),
    dir = string_('/usr/share/datasets/fashion-mnist', { doc = "fashion-mnist: the IDX files; cifar10: the binary "
                                                             .. "version's cifar-10-batches-bin folder (default "
                                                             .. "for cifar10: data/cifar-10-batches-bin)" }),
    augment = boolean(true, { doc = 'cifar10: random 32x32 crops of the image padded by 4 and horizontal flips of '
                                 .. 'the training images, drawn from data.seed, the epoch and the sample' }),
    shape = array({ 1, 28, 28 }, { doc = 'synthetic: the shape of one sample' }),
    classes = integer(10, { min = 2, max = MAX_INT, doc = 'synthetic: the number of classes' }),
    train_size = integer(60000, { min = 1, doc = 'synthetic: training samples' }),
    test_size = integer(10000, { min = 1, doc = 'synthetic: test samples' }),
    seed = integer(7, { min = 0, max = MAX_SEED, doc = 'synthetic: generator seed' }),
    -- text (engine/data/text_corpus.hpp): the model gets input {seq_len} and 256 classes.
    files = list(string_(nil), { default = { '/usr/share/games/fortunes' },
                                 doc = 'text: files read as one stream of bytes, in order; a folder gives its text '
                                    .. 'files by name (not .dat or .u8 files, symbolic links or subfolders). The '
                                    .. 'default is the fortunes corpus, about 2.6 MB of English: apt-get install '
                                    .. 'fortunes' }),
    seq_len = integer(128, { min = 1, max = 65536,
                             doc = "text, tokens: tokens per sample (bytes for text), the model's context length" }),
    validation = number(0.1, { gt = 0, max = 0.5, doc = 'text: the fraction of the text, at its end, held out for '
                                                     .. 'evaluation; tokens: the validation files, a list as '
                                                     .. 'data.train (kept as data.validation_files)' }),
    -- tokens (engine/data/token_files.hpp): the model gets input {seq_len} and vocab classes.
    train = list(string_(nil), { default = {},
                                 doc = 'tokens: the training split, token files or globs (sorted matches), each '
                                    .. 'a shard no window crosses' }),
    validation_files = list(string_(nil), { default = {},
                                            doc = 'tokens: the validation split (write it as data.validation = '
                                               .. '{...})' }),
    vocab = integer(50257, { min = 2, max = 65536,
                             doc = 'tokens: the vocabulary (50257 for GPT-2, 256 for byte tokens); a token at or '
                                .. 'above it is an error' }),
    format = string_('auto', { one_of = { 'auto', 'nanogpt', 'llmc' },
                               doc = "tokens: nanogpt (raw uint16, np.memmap's train.bin), llmc (a 256 x int32 "
                                  .. 'header, magic 20240520, then uint16), auto: told from the header' }),
    validation_windows = integer(512, { min = 0, max = MAX_INTEGER,
                                        doc = 'tokens: the most validation windows one evaluation reads, spread '
                                           .. 'evenly over the split; 0: every window' }),
    on_device = string_('auto', { one_of = { 'auto', 'always', 'never' },
                                  doc = "hold the data set in the device's memory and gather each batch there by "
                                     .. 'index (a data set stored as rows of bytes: fashion-mnist, text). auto: '
                                     .. "when it takes at most an eighth of the device's memory and half of what is "
                                     .. 'free; never: gather on the host and upload each batch' }),
  },
  global_batch = integer(64, { min = 1, doc = 'samples per iteration, summed over all workers' }),
  optimizer = string_('sgd', { one_of = { 'sgd', 'adamw' },
                               doc = "sgd (momentum, nesterov; weight decay on every parameter) or adamw "
                                  .. "(torch.optim.AdamW: decoupled weight decay on weights and embeddings, none on "
                                  .. "biases and norms; bsp sync only)" }),
  lr = number(0.05, { gt = 0, doc = 'peak learning rate' }),
  lr_scaling = string_('linear', { one_of = { 'linear', 'sqrt', 'adascale' },
                                   doc = 'how lr follows a plan whose global batch B is not global_batch (B0): '
                                      .. 'linear lr*B/B0, sqrt lr*sqrt(B/B0), adascale lr times AdaScale\'s gain '
                                      .. '(phi/B0 + 1)/(phi/B + 1), phi the gradient noise scale measured in training' }),
  momentum = number(0.9, { min = 0, lt = 1, doc = 'sgd' }),
  weight_decay = number(0, { min = 0 }),
  nesterov = boolean(false, { doc = 'sgd' }),
  beta1 = number(0.9, { min = 0, lt = 1, doc = "adamw: the first moment's decay" }),
  beta2 = number(0.999, { min = 0, lt = 1, doc = "adamw: the second moment's decay" }),
  eps = number(1e-8, { gt = 0, max = 1, doc = "adamw: added to the second moment's square root" }),
  clip_grad_norm = number(0, { min = 0, doc = "clip the mean gradient's global norm to this before each update "
                                           .. '(0: no clipping); computed on the all-reduced gradient' }),
  accumulate = integer(1, { min = 1, max = 1024, doc = 'micro-batches per worker and step: each worker computes its '
                                                    .. 'local batch in this many parts and sums their gradients, '
                                                    .. 'so a local batch that does not fit in memory at once still '
                                                    .. 'trains (the memory caps grow by this factor)' }),
  schedule = record {
    kind = string_('constant', { one_of = { 'constant', 'step', 'cosine' } }),
    warmup_iterations = integer(0, { min = 0, doc = 'linear ramp from 0 to lr' }),
    step_epochs = number(1, { gt = 0, doc = 'step: multiply by gamma every step_epochs epochs' }),
    gamma = number(0.1, { gt = 0, max = 1 }),
    min_lr = number(0, { min = 0, doc = 'cosine: the floor reached at the last iteration' }),
  },
  stop = record {
    epochs = number(1, { gt = 0, max = 1e9, doc = 'always a bound' }),
    target_accuracy = number(nil, { gt = 0, max = 1, doc = 'stop once test accuracy reaches it' }),
    target_loss = number(nil, { gt = 0, max = 1e6,
                                doc = 'stop once the test (validation) loss, mean per prediction, is at most it' }),
    max_iterations = integer(nil, { min = 1 }),
    max_seconds = number(nil, { gt = 0, doc = 'training wall-clock bound' }),
  },
  eval_every = integer(0, { min = 0, doc = 'iterations between test evaluations; 0 = once per epoch' }),
  log_every = integer(100, { min = 1, doc = 'iterations between progress lines' }),
  eval_batch = integer(1000, { min = 1, doc = 'batch used for test evaluation' }),
  seed = integer(1, { min = 0, max = MAX_SEED }),
  blas_threads = integer(1, { min = 1, max = 1024, doc = 'BLAS threads per rank (ranks share the cores)' }),
  device = string_('auto', { one_of = { 'auto', 'cpu', 'cuda' },
                             doc = 'where workers compute: cuda (a GPU per rank, by local rank; ranks beyond the '
                                .. "GPUs share them), cpu, or auto (cuda where a GPU is present, else cpu)" }),
  devices = list(string_(nil, { one_of = { 'auto', 'cpu', 'cuda' } }),
                 { doc = "per rank, overriding device: a mixed cluster, e.g. {'cuda', 'cuda', 'cpu'}" }),
  fused_step = string_('auto', { one_of = { 'auto', 'always', 'never' },
                                 doc = 'one worker: the whole step (update and NaN skip included) queued on the '
                                    .. 'device with no wait, captured in a CUDA graph per input on a GPU; auto: '
                                    .. 'on a GPU where the run allows it (no emulation, policy, AdaScale or batch '
                                    .. 'norm); always: also on a CPU, or fail saying why not; never: off' }),
  precision = string_('fp32', { one_of = { 'fp32', 'tf32', 'bf16' },
                               doc = 'what GEMMs and convolutions compute in: fp32; tf32 (inputs to 10 mantissa '
                                  .. 'bits, about 1e-3 relative); bf16 (GEMM and convolution inputs to 7 bits, '
                                  .. 'about 4e-3, and convolution outputs too); float32 accumulation, weights, '
                                  .. 'loss and softmax in every mode; tensor cores on a GPU, the same rounding on '
                                  .. 'a CPU' }),
  log_level = string_('info', { one_of = { 'trace', 'debug', 'info', 'warn', 'error', 'off' } }),
  out_dir = string_('', { doc = "run directory; '' = runs/<name>-<timestamp>" }),
  -- tandem sim: the cluster model (engine/sim/simulator.hpp); compute comes from emulation.
  sim = record {
    noise = number(0, { min = 0, doc = 'spread of a mean-1 multiplier on every compute time (see noise_distribution)' }),
    noise_distribution = string_('lognormal', { one_of = { 'lognormal', 'normal', 'uniform', 'spikes' },
                                                doc = 'lognormal: exp(noise z - noise^2/2); normal: 1 + noise z; '
                                                   .. 'uniform: standard deviation noise; spikes: exponential '
                                                   .. 'excess, mean noise, over a floor (a time slice lost now and then)' }),
    seed = integer(1, { min = 0, max = MAX_SEED }),
    latency_us = number(5, { min = 0, doc = 'ring all-reduce: latency per message' }),
    bandwidth_gb_s = number(10, { gt = 0, doc = 'ring all-reduce: bandwidth per link' }),
    ranks_per_host = integer(1, { min = 1, max = MAX_INT, doc = 'workers a host runs: above 1 the gradients are '
                                                              .. 'summed in two levels, the ring across hosts only '
                                                              .. '(their first workers), as a real run across hosts' }),
    trace_every = integer(1, { min = 1, doc = 'trace every n-th iteration (thousands of workers write a lot)' }),
    noise_scale = number(0, { min = 0, doc = 'the gradient noise scale B_noise at the start (0: not modelled): '
                                 .. "each worker's grad_sq is |G|^2 + B_noise / b (|G|^2 = 1), the cluster's "
                                 .. 'global_grad_sq 1 + B_noise / B, times the mean-1 noise of sim.noise; the summary '
                                 .. "gives goodput, samples/s times Pollux's efficiency (B_noise + B0) / (B_noise + B)" }),
    noise_growth = number(0, { min = 0, doc = 'B_noise grows with the epochs e done: '
                                  .. 'noise_scale * (1 + noise_growth * e)' }),
  },
  console = boolean(true, { doc = 'rank 0 listens on <run dir>/repl.sock (owner only) for tandem attach' }),
  save_params = boolean(false, { doc = 'write the final parameters (float32, flat) to <run dir>/params.f32, and '
                                     .. 'as named tensors in PyTorch\'s layout to <run dir>/params.safetensors' }),
  init_from = string_(nil, { doc = "a .safetensors file the model's weights start from: tandem's params.safetensors "
                                 .. "or Hugging Face's GPT-2 model.safetensors (fine-tuning; a resumed run starts "
                                 .. 'from its checkpoint instead)' }),
  init_from_strict = boolean(true, { doc = "init_from: every tensor of the model in the file and nothing else; "
                                        .. "false keeps the model's own initialisation for what the file lacks" }),
  tensorboard = boolean(false, { doc = 'write TensorBoard event files (loss, accuracy, throughput, each worker\'s '
                                     .. 'compute/idle/local batch) to <run dir>/tensorboard/ (rank 0)' }),

  workers = integer(1, { min = 1, max = MAX_INT,
                         doc = 'ranks; more than 1 starts them through mpirun (or run under mpirun -np N)' }),
  hostfile = string_('', { doc = "hosts the launcher starts the ranks on: an OpenMPI hostfile ('host slots=N' "
                               .. "lines); '' = this machine (tandem run --hostfile FILE)" }),
  hosts = string_('', { doc = "hosts as 'a:2,b:2' (host:slots), like horovodrun -H; with hostfile, both "
                           .. "(tandem run --host LIST)" }),
  collective_timeout_s = number(30, { gt = 0, doc = 'a collective not done by then (a worker dead, stopped or hung) '
                                                  .. 'aborts the run, naming the missing ranks' }),
  -- How gradients cross between workers (engine/train/sync/gradient_sync.hpp).
  comm = record {
    bucket_mb = number(25, { min = 0, max = 1e6, doc = 'between hosts, gradients are all-reduced in buckets of about '
                                                .. 'this many MB, each started as the backward pass finishes it (as '
                                                .. 'DDP\'s bucket_cap_mb); 0: one all-reduce after the backward pass' }),
    dtype = string_('fp32', { one_of = { 'fp32', 'bf16' },
                              doc = 'what gradients cross between hosts as: bf16 halves the bytes (each rank\'s part '
                                 .. 'rounded once, the sum accumulated in fp32 and rounded once); on one host they '
                                 .. 'stay fp32' }),
  },
  -- Checkpoints (engine/train/checkpoint/file.hpp): tandem run --resume RUN_DIR continues.
  checkpoint = record {
    every = integer(0, { min = 0, doc = 'iterations between checkpoints (0: none, unless every_s)' }),
    every_s = number(0, { min = 0, doc = 'seconds of training between checkpoints (0: none, unless every)' }),
    keep = integer(3, { min = 1, doc = 'checkpoints kept (the oldest are deleted)' }),
    final = boolean(true, { doc = 'a checkpoint when the run ends, when checkpoints are on' }),
  },
  -- tandem run --elastic: the launcher restarts a failed job from its newest good
  -- checkpoint (engine/train/elastic.hpp).
  elastic = record {
    min_workers = integer(1, { min = 1, max = MAX_INT, doc = 'fewer workers left than this: the run stops' }),
    max_restarts = integer(3, { min = 0, max = 1000, doc = 'restarts after which a further failure ends the run' }),
    probe_timeout_s = number(10, { gt = 0, doc = 'across hosts: before a restart every host is asked to run '
                                             .. 'tandem; one that has not within this many seconds is left out' }),
  },
  max_nonfinite_steps = integer(5, { min = 1, doc = 'steps in a row skipped for a NaN/Inf gradient after which '
                                                 .. 'the run stops' }),
  -- Fault injection, for the reliability tests: a worker dies (SIGKILL), stops
  -- (SIGSTOP) or produces a NaN gradient at an iteration.
  faults = list(record {
    rank = integer(0, { min = 0, max = MAX_INT }),
    iteration = integer(0, { min = 0 }),
    kind = string_('kill', { one_of = { 'kill', 'stop', 'nan' } }),
    during = string_('compute', { one_of = { 'compute', 'allreduce', 'checkpoint' },
                                  doc = 'kill/stop: in the step\'s compute, in the gradient all-reduce, or '
                                     .. 'half-way through writing a checkpoint (rank 0 writes them)' }),
  }, { doc = "testing: {{rank = 1, iteration = 20, kind = 'kill', during = 'allreduce'}}" }),
  plan = record {
    kind = string_('equal', { one_of = { 'equal', 'proportional', 'fixed', 'random' },
                              doc = 'equal split, proportional to emulated speeds, fixed batches, or random '
                                 .. '(a new uneven split every iteration, to test that any split trains the same)' }),
    batches = list(integer(nil, { min = 0 }), { doc = 'fixed: one local batch per rank, summing to global_batch' }),
    micro_batches = list(integer(nil, { min = 1, max = 1024 }),
                         { doc = 'one micro-batch count per rank (each computes its local batch in that many, '
                            .. 'gradients summed); default: accumulate for every rank. bsp only' }),
  },
  -- How workers synchronise unless a policy says otherwise (engine/train/plan.hpp).
  sync = record {
    mode = string_('bsp', { one_of = { 'bsp', 'grouped', 'ksync', 'local' },
                            doc = 'bsp: all-reduce every iteration; grouped: groups all-reduce inside and push to a '
                               .. 'parameter server asynchronously; ksync: the server applies the first k workers\' '
                               .. 'gradients; local: local SGD, models averaged every local_steps iterations' }),
    groups = list(integer(nil, { min = 1 }), { doc = 'grouped: each worker\'s group, numbered from 1 '
                                                  .. '(default: one group); {1, 2, ..., N} is ASGD' }),
    k = integer(0, { min = 0, max = MAX_INT, doc = 'ksync: gradients per update (0: every worker)' }),
    local_steps = integer(4, { min = 1, max = 10000,
                               doc = 'local: iterations between model averages (H); past 10000 the workers would '
                                  .. 'train apart for whole runs (an epoch of Fashion-MNIST is 938 iterations at '
                                  .. 'batch 64), which is no longer data-parallel training' }),
    staleness = integer(1, { min = 0, max = MAX_INT,
                             doc = 'grouped: server versions a computing group may fall behind before '
                                .. 'faster groups wait for it (S)' }),
    sync_every = integer(10, { min = 1, max = MAX_INT,
                               doc = 'grouped, ksync: global batches of server updates between the points '
                                  .. 'where all workers meet (stats, policy, plan changes)' }),
    slow_momentum = number(0.7, { min = 0, lt = 1, doc = 'grouped: the parameter server steps without momentum '
                                    .. 'inside a segment and applies this momentum to each segment\'s displacement at '
                                    .. 'the meeting (SlowMo), keeping the step lr / (1 - momentum); 0: momentum on '
                                    .. 'every push instead' }),
  },
  -- A Lua policy deciding the plan every iteration (engine/script/policy_host.hpp).
  policy = record {
    file = string_(nil, { doc = "a policy under scripts/policies/ by name ('lbb'), or a path to a .lua file; "
                               .. 'unset: the plan stays as plan.kind says' }),
    params = free { doc = "the policy's parameters (thresholds...), given to init() as cluster.params" },
    budget_ms = number(50, { gt = 0, max = 60000, doc = 'time budget of one policy call, in CPU ms; a call past '
                                                    .. 'it is interrupted (at most a minute: training waits for it)' }),
    memory_mb = number(64, { gt = 0, max = 65536, doc = "memory cap of the policy's Lua state (at most 64 GiB)" }),
    init_budget_ms = number(nil, { gt = 0, max = 600000,
                                   doc = 'time budget, in CPU ms, of loading the policy file, init(cluster) and '
                                         .. 'restore(state), off the decisions\' path; unset: budget_ms + 2000' }),
    max_failures = integer(3, { min = 1, max = MAX_INT, doc = 'failed calls in a row after which the policy is '
                                                            .. 'dropped and the last good plan kept' }),
    history = integer(20, { min = 1, max = 10000, doc = 'iterations of stats history given to step() (at most '
                                                     .. '10000: the window is rebuilt on every call)' }),
    watch = boolean(true, { doc = 'reload the policy when its file changes (hot swap)' }),
    min_batch = integer(0, { min = 0, doc = "every worker's smallest local batch" }),
    max_batch = list(integer(nil, { min = 1 }), { doc = "per worker, its largest micro-batch (its memory cap: a "
                                                   .. 'local batch of k micro-batches may hold k times it); '
                                                   .. 'default: global_batch (policy.global_batch.max when set)' }),
    global_batch = record({
      min = integer(0, { min = 0, max = MAX_INT, doc = 'the smallest global batch a plan may carry (0: global_batch)' }),
      max = integer(0, { min = 0, max = MAX_INT, doc = 'the largest (0: global_batch); min < max lets a policy '
                                                    .. 'choose B (goodput), the learning rate following lr_scaling' }),
    }, { doc = 'the global batches a plan may carry; default: global_batch alone (fixed)' }),
  },
  -- Emulated heterogeneity (engine/train/emulation/emulator.hpp). Ranks are numbered from 0.
  emulation = record {
    enabled = boolean(nil, { doc = 'default: true when any other emulation key is set' }),
    reference = number(1, { min = MIN_REFERENCE, max = 1,
                            doc = 'the speed-1 device runs at this fraction of a core (0.5 = half a core)' }),
    speeds = list(number(nil, { min = MIN_SPEED, max = MAX_SPEED }),
                  { doc = 'one speed factor per rank (shorthand for workers[i].speed)' }),
    comm_delay_ms = list(number(nil, { min = 0 }), { doc = 'per rank, added to every collective it joins' }),
    workers = list(record {
      speed = number(nil, { min = MIN_SPEED, max = MAX_SPEED }),
      profile = record {
        batch = list(number(nil, { gt = 0 }), { doc = 'measured local batches' }),
        ms = list(number(nil, { gt = 0 }), { doc = 'compute ms at each of those batches' }),
      },
      comm_delay_ms = number(nil, { min = 0 }),
      memory_mb = number(nil, { gt = 0, doc = "the worker's device memory: with emulation.memory it caps the "
                                           .. 'local batch (joins policy.max_batch)' }),
    }, { doc = 'per rank: speed, or a measured device profile; comm_delay_ms; memory_mb' }),
    memory = record {
      batch = list(number(nil, { gt = 0 }), { doc = 'local batches' }),
      mb = list(number(nil, { gt = 0 }), { doc = "the model's device memory at each (tandem profile's memory_mb)" }),
    },
    events = list(record {
      worker = integer(0, { min = 0, max = MAX_INT }),
      speed = number(1, { min = MIN_SPEED, max = MAX_SPEED, doc = 'multiplies the worker speed while active' }),
      from = integer(0, { min = 0, doc = 'first iteration' }),
      to = integer(nil, { min = 1, doc = 'iteration it ends before; default: the end of the run' }),
    }, { doc = 'scheduled slowdowns: {worker = 3, speed = 0.3, from = 200, to = 300}' }),
    random = record {
      probability = number(0, { min = 0, max = 1, doc = 'per worker and iteration' }),
      duration = list(integer(nil, { min = 1 }), { doc = '{min, max} iterations' }),
      speed = list(number(nil, { min = MIN_SPEED, max = MAX_SPEED }), { doc = '{min, max} speed multiplier' }),
      seed = integer(1, { min = 0, max = MAX_SEED }),
    },
    speed_trace = string_(nil, { doc = 'file: a line per iteration, a speed multiplier per rank' }),
    calibration = record {
      batch = list(number(nil, { gt = 0 }), { doc = 'batches of a previous run\'s calibration.json' }),
      ms = list(number(nil, { gt = 0 }), { doc = 'its compute ms; given, it replaces the start-up calibration' }),
      host_ms = list(number(nil, { min = 0 }), { doc = 'its host ms (batch loading + optimizer step)' }),
    },
  },
}

-- What the model sees for each built-in data set (synthetic: data.shape, data.classes;
-- text: {data.seq_len} and a class per byte value).
M.text_classes = 256
M.datasets = {
  ['fashion-mnist'] = { shape = { 1, 28, 28 }, classes = 10, train_size = 60000, test_size = 10000 },
  cifar10 = { shape = { 3, 32, 32 }, classes = 10, train_size = 50000, test_size = 10000,
              dir = 'data/cifar-10-batches-bin' },
}

local SCHEMA_HINT = 'every key an experiment may hold is listed, with its default, in scripts/tandem/experiment.lua'

------------------------------------------------------------------------------------
-- Errors

local UserError = { __tostring = function(e) return e.message end }

local function user_error(message, hint, where)
  return setmetatable({ message = message, hint = hint, where = where }, UserError)
end

-- The override that set `path` or a table holding it (faults[1].rank: faults), if any.
local function origin_of(ctx, path)
  while path do
    if ctx.origin[path] then return ctx.origin[path] end
    path = path:match('^(.+)%.[^.%[]+$') or path:match('^(.+)%[%d+%]$')
  end
  return nil
end

-- ctx: {source = experiment file, origin = {[dotted key] = "override 'k=v'"}}
local function fail(ctx, path, message, hint)
  local origin = path and origin_of(ctx, path)
  if origin then
    error(user_error(message .. ' (from ' .. origin .. ')', hint or 'fix the override on the command line'), 0)
  end
  error(user_error(message, hint or ('fix the experiment file ' .. ctx.source .. '; ' .. SCHEMA_HINT:sub(1, 1):lower() ..
                                     SCHEMA_HINT:sub(2)), ctx.source), 0)
end

-- A number as a message shows it: integers in full (2^53 is 9007199254740992, not
-- 9.007199254741e+15), others as Lua writes them (1e+308).
local function number_text(v)
  if v == math.floor(v) and math.abs(v) <= MAX_INTEGER then return string.format('%.0f', v) end
  return tostring(v)
end

-- A string as a message shows it: control characters escaped, so that one with an
-- embedded NUL ('bsp\0evil') is not cut short where C prints it.
local function string_text(v)
  return (v:gsub('%c', function(c) return string.format('\\%d', c:byte()) end))
end

local function show(v)
  if type(v) == 'string' then return string.format('string %q', v) end  -- %q escapes a NUL
  if type(v) == 'number' then return 'number ' .. number_text(v) end
  if type(v) == 'boolean' then return type(v) .. ' ' .. tostring(v) end
  return type(v)
end

local expected = {
  number = 'a number', integer = 'an integer', string = 'a string', boolean = 'true or false',
  array = 'a non-empty list of positive integers', record = 'a table', free = 'a table',
  list = 'a list (values 1..n, no holes)',
}

------------------------------------------------------------------------------------
-- "did you mean"

local distance = require('tandem.text').distance

local function join(path, key) return path == '' and key or path .. '.' .. key end

local function sorted_keys(t)
  local keys = {}
  for k in pairs(t) do keys[#keys + 1] = k end
  table.sort(keys, function(a, b)
    if type(a) == type(b) and (type(a) == 'string' or type(a) == 'number') then return a < b end
    return type(a) < type(b)
  end)
  return keys
end

-- Every dotted key of the schema, with its last part.
local function all_keys(node, path, out)
  out = out or {}
  for _, k in ipairs(sorted_keys(node.fields)) do
    local sub = node.fields[k]
    out[#out + 1] = { path = join(path, k), leaf = k }
    if sub.kind == 'record' then all_keys(sub, join(path, k), out) end
  end
  return out
end

-- The nearest known key to `key` written inside the record at `path`: a sibling
-- close in spelling, or a key of the same name elsewhere (epochs -> stop.epochs).
local function suggest(key, node, path)
  local best, best_d
  local limit = math.max(1, math.min(3, math.floor(#key / 3)))
  for _, k in ipairs(sorted_keys(node.fields)) do
    local d = distance(key, k)
    if d <= limit and (not best_d or d < best_d) then best, best_d = join(path, k), d end
  end
  if best_d == 0 or best_d == 1 then return best end
  for _, e in ipairs(all_keys(M.schema, '')) do
    local d = distance(key, e.leaf)
    if e.path ~= join(path, key) and d <= limit and (not best_d or d < best_d) then best, best_d = e.path, d end
  end
  return best
end

-- Keys that earlier versions had, with what replaced them.
local REPLACED = {
  tf32 = { key = 'precision', hint = "write precision = 'tf32' for tf32 = true (and leave it out for false)" },
}

local function unknown_key(ctx, path, key, node, origin_text)
  local full = join(path, key)
  local near = suggest(key, node, path)
  local where = origin_text and ("in override '" .. origin_text .. "'") or 'in experiment'
  local message = string.format("unknown key '%s' %s", full, where)
  local hint = SCHEMA_HINT
  if REPLACED[full] then
    message = message .. string.format(" (it was replaced by '%s')", REPLACED[full].key)
    hint = REPLACED[full].hint
  elseif near then
    message = message .. string.format(" (did you mean '%s'?)", near)
    hint = string.format("rename '%s' to '%s'", full, near)
  end
  if origin_text then error(user_error(message, hint), 0) end
  error(user_error(message, hint, ctx.source), 0)
end

------------------------------------------------------------------------------------
-- Checking values

local function deep_copy(v, seen)
  if type(v) ~= 'table' then return v end
  seen = seen or {}
  if seen[v] then return seen[v] end
  local out = {}
  seen[v] = out
  for k, x in pairs(v) do out[deep_copy(k, seen)] = deep_copy(x, seen) end
  return out
end

local function finite(v) return v == v and v ~= math.huge and v ~= -math.huge end

-- Type and range of one value (not nil) against its node.
local function check_value(ctx, node, v, path)
  local kind = node.kind
  local function bad()
    fail(ctx, path, string.format("'%s' must be %s, got %s", path, expected[kind], show(v)),
         string.format("set %s to %s%s", path, expected[kind], node.doc and (' (' .. node.doc .. ')') or ''))
  end
  if kind == 'number' or kind == 'integer' then
    if type(v) ~= 'number' or not finite(v) then bad() end
    if kind == 'integer' and v ~= math.floor(v) then bad() end
    local function range(ok, rel, bound)
      if not ok then
        fail(ctx, path, string.format("'%s' must be %s %s, got %s", path, rel, number_text(bound), number_text(v)),
             string.format('choose a value of %s %s %s', path, rel, number_text(bound)))
      end
    end
    if node.min then range(v >= node.min, '>=', node.min) end
    if node.max then range(v <= node.max, '<=', node.max) end
    if node.gt then range(v > node.gt, '>', node.gt) end
    if node.lt then range(v < node.lt, '<', node.lt) end
    -- Past the key's own bounds, the bound of every integer.
    if kind == 'integer' and math.abs(v) > MAX_INTEGER then
      local lo = node.min or (node.gt and node.gt + 1) or -MAX_INTEGER
      local hi = math.min(node.max or MAX_INTEGER, MAX_INTEGER)
      fail(ctx, path, string.format("'%s' must be an integer from %s to %s, got %s", path, number_text(lo),
                                    number_text(hi), number_text(v)),
           string.format('choose %s in that range (integers are exact up to 2^53 = %s)', path,
                         number_text(MAX_INTEGER)))
    end
  elseif kind == 'string' then
    if type(v) ~= 'string' then bad() end
    -- C reads a string only up to a NUL: 'bsp\0evil' would be taken for 'bsp', a path
    -- for a shorter one.
    local nul = v:find('%z')
    if nul then
      fail(ctx, path, string.format("'%s' holds a NUL byte at position %d: '%s'", path, nul, string_text(v)),
           string.format('remove the \\0 from %s', path))
    end
    if node.one_of then
      local ok = false
      for _, o in ipairs(node.one_of) do ok = ok or o == v end
      if not ok then
        fail(ctx, path, string.format("'%s' must be one of %s, got '%s'", path, table.concat(node.one_of, ', '),
                                      string_text(v)),
             string.format('set %s to one of: %s', path, table.concat(node.one_of, ', ')))
      end
    end
  elseif kind == 'boolean' then
    if type(v) ~= 'boolean' then bad() end
  elseif kind == 'array' then
    if type(v) ~= 'table' or #v == 0 then bad() end
    local count = 0
    for k in pairs(v) do count = count + 1 end
    if count ~= #v then bad() end  -- holes or named keys
    for k, x in pairs(v) do
      if type(k) ~= 'number' or k < 1 or k > #v or k ~= math.floor(k) then bad() end
      if type(x) ~= 'number' or not finite(x) or x ~= math.floor(x) or x < 1 then
        fail(ctx, path, string.format("'%s[%d]' must be a positive integer, got %s", path, k, show(x)),
             string.format('write %s as a list of positive integers, e.g. {3, 32, 32}', path))
      end
    end
  elseif kind == 'free' then
    if type(v) ~= 'table' then bad() end
  elseif kind == 'list' then
    if type(v) ~= 'table' then bad() end
    local count = 0
    for k in pairs(v) do
      count = count + 1
      if type(k) ~= 'number' or k < 1 or k > #v or k ~= math.floor(k) then bad() end
    end
    if count ~= #v then bad() end  -- holes: {1, nil, 3}
    for i, x in ipairs(v) do check_value(ctx, node.item, x, string.format('%s[%d]', path, i)) end
  elseif kind == 'record' then
    if type(v) ~= 'table' then bad() end
    for _, key in ipairs(sorted_keys(v)) do
      if type(key) ~= 'string' then
        fail(ctx, path, string.format("unexpected entry [%s] = %s in %s", tostring(key), show(v[key]),
                                      path == '' and 'experiment' or "'" .. path .. "'"),
             'every entry needs a name: write key = value')
      end
      local sub = node.fields[key]
      if not sub then
        local origin = origin_of(ctx, path)  -- a table given whole on the command line
        unknown_key(ctx, path, key, node, origin and origin:match("^override '(.*)'$"))
      end
      check_value(ctx, sub, v[key], join(path, key))
    end
  end
end

-- Values of the wrong type are left for check_value to report (an override may
-- have put a number where a table belongs).
local function fill_defaults(node, v)
  for key, sub in pairs(node.fields) do
    if sub.kind == 'record' then
      if v[key] == nil then v[key] = {} end
      if type(v[key]) == 'table' then fill_defaults(sub, v[key]) end
    elseif sub.kind == 'list' and type(v[key]) == 'table' and sub.item.kind == 'record' then
      for _, x in ipairs(v[key]) do
        if type(x) == 'table' then fill_defaults(sub.item, x) end
      end
    elseif v[key] == nil and sub.default ~= nil then
      v[key] = deep_copy(sub.default)
    end
  end
end

local function check_required(ctx, node, v, path)
  for _, key in ipairs(sorted_keys(node.fields)) do
    local sub = node.fields[key]
    if sub.required and v[key] == nil then
      fail(ctx, nil, string.format("experiment has no '%s'", join(path, key)),
           string.format("add %s = ... (%s)", join(path, key), sub.doc or expected[sub.kind]))
    end
    if sub.kind == 'record' then check_required(ctx, sub, v[key], join(path, key)) end
  end
end

------------------------------------------------------------------------------------
-- Overrides: "key=value", dotted keys reaching into tables

local function parse_free(text)
  if text == 'true' then return true elseif text == 'false' then return false end
  if tonumber(text) then return tonumber(text) end
  -- a comma-separated list of numbers, braces optional: 512,256 or {512,256}
  local body = text:match('^{(.*)}$') or text
  if body:find(',') then
    local list = {}
    for part in (body .. ','):gmatch('([^,]*),') do
      local n = tonumber(part)
      if not n then return text end
      list[#list + 1] = n
    end
    return list
  end
  return text
end

-- A Lua table constructor from the command line ('faults={{rank = 1, iteration = 20}}'),
-- evaluated with no globals and a bound on the work it may do.
local function parse_table_literal(text, sub, path, o)
  local chunk, err = loadstring('return ' .. text, '=override')
  local ok, v = false, nil
  if chunk then
    setfenv(chunk, {})
    if jit then jit.off(chunk, true) end  -- interpreted, so the count hook sees every instruction
    local hook, mask, count = debug.gethook()
    debug.sethook(function() error('it takes too long to evaluate', 0) end, '', 1000000)
    ok, v = pcall(chunk)
    if hook then debug.sethook(hook, mask, count) else debug.sethook() end
    if not ok then err = tostring(v) end
  end
  if ok and type(v) ~= 'table' then err = 'it gives ' .. show(v) end
  if err then
    error(user_error(string.format("override '%s': '%s' is not a Lua table: %s", o, path, err),
                     string.format("write it as a Lua table constructor in quotes, e.g. '%s={...}'%s", path,
                                   sub.doc and (' (' .. sub.doc .. ')') or '')), 0)
  end
  return v
end

-- Reads the text of an override as the schema says the key's value is typed.
local function parse_typed(ctx, sub, text, path, o)
  local kind = sub.kind
  if kind == 'string' then return text end
  if kind == 'number' or kind == 'integer' then
    local n = tonumber(text)
    if not n then
      error(user_error(string.format("override '%s': '%s' must be %s, got '%s'", o, path, expected[kind], text),
                       string.format('write %s=<number>', path)), 0)
    end
    return n
  end
  if kind == 'boolean' then
    if text == 'true' then return true elseif text == 'false' then return false end
    error(user_error(string.format("override '%s': '%s' must be true or false, got '%s'", o, path, text),
                     string.format('write %s=true or %s=false', path, path)), 0)
  end
  if kind == 'array' or (kind == 'list' and (sub.item.kind == 'number' or sub.item.kind == 'integer')) then
    local v = parse_free(text)
    if type(v) == 'number' then v = { v } end
    if type(v) ~= 'table' then
      error(user_error(string.format("override '%s': '%s' must be a comma-separated list of integers, got '%s'",
                                     o, path, text), string.format('write %s=3,32,32', path)), 0)
    end
    return v
  end
  if kind == 'list' and sub.item.kind == 'string' then
    local v = {}
    for item in text:gmatch('[^,]+') do v[#v + 1] = item:match('^%s*(.-)%s*$') end
    return v
  end
  -- A table (a record, free-form, or a list of records): written whole as a Lua
  -- table constructor, or (records, free-form) key by key.
  if text:match('^%s*{') then return parse_table_literal(text, sub, path, o) end
  if kind == 'free' then
    local v = parse_free(text)
    if type(v) == 'table' then return v end
  end
  local example = kind == 'record' and sorted_keys(sub.fields)[1] or 'key'
  local keywise = kind ~= 'list' and string.format('set its keys (%s.%s=...), or ', path, example) or ''
  error(user_error(string.format("override '%s': '%s' is %s, got '%s'", o, path,
                                 kind == 'list' and 'a list of tables' or 'a table', text),
                   string.format('%swrite it whole as a Lua table in quotes: \'%s={...}\'%s', keywise, path,
                                 sub.doc and (' (' .. sub.doc .. ')') or '')), 0)
end

-- data.validation is a fraction for text and a list of files for tokens (as nanoGPT
-- and llm.c users have a val.bin beside train.bin): a list given there is kept as
-- data.validation_files, so that each key keeps one kind.
local function validation_as_files(ctx, exp)
  local data = type(exp) == 'table' and exp.data
  if type(data) == 'table' and type(data.validation) == 'table' then
    ctx.validation_listed = 'in the experiment file'
    if data.validation_files ~= nil then
      error(user_error('data.validation lists files and data.validation_files is given too',
                       'give the validation files once, as data.validation = {...}'), 0)
    end
    data.validation_files, data.validation = data.validation, nil
  end
end

-- The same for an override: data.validation=FILE[,FILE] (not a number) or a table
-- sets data.validation_files.
local function validation_override(ctx, o)
  if type(o) ~= 'string' then return o end
  local text = o:match('^%s*data%.validation%s*=(.*)$')
  if not text then return o end
  if tonumber(text) then  -- a fraction, given last: what the command line says wins
    ctx.validation_listed = nil
    return o
  end
  ctx.validation_listed = "override '" .. o .. "'"
  local body = text:match('^%s*{(.*)}%s*$')
  if body then  -- a Lua table of strings: 'data.validation={"a.bin", "b.bin"}'
    local items = {}
    for item in body:gmatch('[^,]+') do
      items[#items + 1] = item:match('^%s*(.-)%s*$'):gsub('^["\'](.*)["\']$', '%1')
    end
    text = table.concat(items, ',')
  end
  return 'data.validation_files=' .. text
end

local function apply_override(ctx, exp, o)
  if type(o) ~= 'string' then
    error(user_error('an override must be a key=value string, got ' .. show(o)), 0)
  end
  local key, text = o:match('^%s*([^=%s]+)%s*=(.*)$')
  if not key or key:find('^%.') or key:find('%.$') or key:find('%.%.') then
    error(user_error(string.format("override '%s' is not key=value", o),
                     'write a setting as key=value, e.g. lr=0.02 or stop.epochs=3'), 0)
  end
  local parts = {}
  for p in key:gmatch('[^.]+') do parts[#parts + 1] = p end
  local node, target, path = M.schema, exp, ''
  for i, p in ipairs(parts) do
    local last = i == #parts
    local full = join(path, p)
    if node.kind == 'free' then
      -- free-form tables (model_args) take any key
      if last then
        target[p] = parse_free(text)
        ctx.origin[full] = "override '" .. o .. "'"
      else
        if type(target[p]) ~= 'table' then target[p] = {} end
        target = target[p]
      end
    else
      local sub = node.fields[p]
      if not sub then unknown_key(ctx, path, p, node, o) end
      if last then
        target[p] = parse_typed(ctx, sub, text, full, o)
        ctx.origin[full] = "override '" .. o .. "'"
      else
        if sub.kind ~= 'record' and sub.kind ~= 'free' then
          error(user_error(string.format("override '%s': '%s' is %s, it has no key '%s'", o, full,
                                         expected[sub.kind], parts[i + 1]),
                           string.format('write %s=...', full)), 0)
        end
        if type(target[p]) ~= 'table' then target[p] = {} end
        target = target[p]
      end
    end
    node, path = node.kind == 'free' and node or node.fields[p], full
  end
end

------------------------------------------------------------------------------------
-- The model

-- A readable file (a directory opens, but does not read).
local file_exists = require('tandem.search_path').readable

local function dirname(path) return path:match('^(.*)/[^/]*$') or '.' end

-- The model file for `model`: a name under <root>/models/, or a path (tried as
-- given, then next to the experiment file, then under the root).
function M.model_path(model, source)
  local root = package.tandem_root or '.'
  if not (model:find('/') or model:match('%.lua$')) then
    if not model:match('^[%w_%-]+$') then return nil, { root .. '/models/' .. model .. '.lua' } end
    local p = root .. '/models/' .. model .. '.lua'
    return file_exists(p) and p or nil, { p }
  end
  local tried = { model }
  if model:sub(1, 1) ~= '/' then
    if source then tried[#tried + 1] = dirname(source) .. '/' .. model end
    tried[#tried + 1] = root .. '/' .. model
  end
  for _, p in ipairs(tried) do
    if file_exists(p) then return p, tried end
  end
  return nil, tried
end

-- How a model file is named in messages and layers' `where`: relative to the root
-- when it lies under it (models/mlp.lua), else as found.
local function display_path(path)
  local root = package.tandem_root
  if root and path:sub(1, #root + 1) == root .. '/' then return path:sub(#root + 2) end
  return path
end

-- Loads the model file into a fresh environment (globals readable, not writable
-- through) and calls its function with args; returns the validated model.
function M.build_model(ctx, exp, input, classes)
  local path, tried = M.model_path(exp.model, ctx.source)
  if not path then
    fail(ctx, 'model', string.format("model '%s' not found (looked for %s)", exp.model, table.concat(tried, ', ')),
         "use a model under models/ by name (model = 'mlp', 'lenet'), or a path to a model .lua file")
  end
  local shown = display_path(path)
  local f = assert(io.open(path, 'rb'))
  local text = f:read('*a')
  f:close()
  local chunk, err = loadstring(text, '@' .. shown)
  if not chunk then
    local where = tostring(err):match('^(.-:%d+):')
    error(user_error('syntax error in model ' .. shown .. ': ' .. tostring(err),
                     'fix the syntax at ' .. (where or shown) ..
                       '; a missing comma, `end` or closing bracket is often reported on a later line',
                     where or shown), 0)
  end
  local env = setmetatable({}, { __index = _G })
  setfenv(chunk, env)
  -- The model's code runs under the engine's load deadline (a loop that never ends
  -- is stopped, with a traceback of where); a Lua test's resolve() has none.
  local deadline = package.loaded['tandem.load_deadline']
  if deadline then deadline.arm('model file ' .. shown) end
  local ctor = chunk()
  if type(ctor) ~= 'function' then
    error(user_error(string.format('model file %s returned %s, not a function', shown, show(ctor)),
                     'end the model file with `return function(args) return nn.model{...} end`', shown), 0)
  end
  local args = deep_copy(exp.model_args)
  for _, k in ipairs({ 'input', 'classes' }) do
    if args[k] ~= nil then
      fail(ctx, 'model_args.' .. k, string.format("model_args.%s is set by the data set; remove it", k),
           'the model gets input and classes from data (data.shape and data.classes for synthetic data, '
             .. '{data.seq_len} and 256 for text)')
    end
  end
  args.input, args.classes = deep_copy(input), classes
  -- The model sees its arguments through a table that notes which keys it reads, so
  -- a model_args key it never reads (a typo, or an argument of another model) is an
  -- unknown key like any other. Iterating the arguments (pairs, next, ipairs in the
  -- model file) reads them all.
  local read, iterated = {}, false
  local proxy = setmetatable({}, {
    __index = function(_, k) read[k] = true; return args[k] end,
    __newindex = function(_, k, v) read[k] = true; args[k] = v end,
  })
  local function unwrap(t)
    if t == proxy then iterated = true; return args end
    return t
  end
  env.pairs = function(t) return pairs(unwrap(t)) end
  env.ipairs = function(t) return ipairs(unwrap(t)) end
  env.next = function(t, k) return next(unwrap(t), k) end
  env.unpack = function(t, ...) return unpack(unwrap(t), ...) end
  env.rawget = function(t, k) if t == proxy then read[k] = true; return args[k] end return rawget(t, k) end
  nn.building = shown
  local model = ctor(proxy)
  nn.building = nil
  if deadline then deadline.disarm() end
  if not iterated then
    local known = {}
    for k in pairs(read) do
      if k ~= 'input' and k ~= 'classes' then known[#known + 1] = tostring(k) end
    end
    table.sort(known)
    for _, k in ipairs(sorted_keys(exp.model_args)) do
      if not read[k] then
        local near, near_d
        for _, r in ipairs(known) do
          local d = distance(tostring(k), r)
          if d <= 2 and (not near_d or d < near_d) then near, near_d = r, d end
        end
        fail(ctx, 'model_args.' .. tostring(k),
             string.format("unknown key 'model_args.%s': model %s does not read it%s", tostring(k), shown,
                           near and string.format(" (did you mean 'model_args.%s'?)", near) or ''),
             #known > 0 and string.format('remove it; model %s reads model_args.%s', shown,
                                          table.concat(known, ', model_args.'))
               or string.format('remove it: model %s reads no model_args', shown))
      end
    end
  end
  local problem = nn.check_model(model)
  if problem then
    error(user_error(string.format('the function in model file %s returned a model that %s', shown, problem),
                     'return nn.model{name = ..., layers = {...}} built with tandem.nn', shown), 0)
  end
  local function copy_layers(list)
    local out = {}
    for i, l in ipairs(list) do
      out[i] = { type = l.type, args = deep_copy(l.args), where = l.where or (shown .. ':?') }
      if l.body then out[i].body = copy_layers(l.body) end
      if l.shortcut then out[i].shortcut = copy_layers(l.shortcut) end
    end
    return out
  end
  local layers = copy_layers(model.layers)
  return { name = model.name, file = shown, input = deep_copy(input), classes = classes, layers = layers }
end

------------------------------------------------------------------------------------
-- resolve

local function same_list(a, b)
  if #a ~= #b then return false end
  for i = 1, #a do if a[i] ~= b[i] then return false end end
  return true
end

-- exp: the table an experiment file returned; overrides: a list of "key=value"
-- strings; source: the experiment file (for the default name, messages, and model
-- paths relative to it). Returns a new table: every key of the schema filled in,
-- `model` replaced by the built model {name, file, input, classes, layers}, plus
-- `source` and `overrides` for the record. world: the ranks an mpirun started by
-- hand has started (nil otherwise), which every per-worker setting must fit.
function M.resolve(exp, overrides, source, world)
  source = source or 'experiment'
  if world ~= nil and (type(world) ~= 'number' or world < 1 or world ~= math.floor(world)) then
    error(user_error('the number of ranks must be a positive integer, got ' .. show(world)), 0)
  end
  local ctx = { source = source, origin = {} }
  if type(exp) ~= 'table' then
    error(user_error(string.format('experiment %s returned %s, not a table', source, show(exp)),
                     "end the experiment file with `return { model = 'mlp', ... }`", source), 0)
  end
  overrides = overrides or {}
  if type(overrides) ~= 'table' then error(user_error('overrides must be a list of key=value strings'), 0) end
  exp = deep_copy(exp)
  validation_as_files(ctx, exp)
  check_value(ctx, M.schema, exp, '')  -- the file's own mistakes first, located in the file
  for _, o in ipairs(overrides) do apply_override(ctx, exp, validation_override(ctx, o)) end
  local emulation_given = type(exp.emulation) == 'table' and next(exp.emulation) ~= nil
  fill_defaults(M.schema, exp)
  if exp.emulation.enabled == nil then exp.emulation.enabled = emulation_given end
  check_required(ctx, M.schema, exp, '')
  check_value(ctx, M.schema, exp, '')

  if exp.name == nil then exp.name = source:match('([^/]+)%.lua$') or source:match('([^/]+)$') or 'experiment' end
  if exp.name == '' then fail(ctx, 'name', "'name' is empty", 'give the run a name, or leave it out') end
  if exp.nesterov and exp.momentum == 0 then
    fail(ctx, 'nesterov', 'nesterov = true needs momentum > 0', 'set momentum (e.g. 0.9), or nesterov = false')
  end

  -- The ranks the run will have: `workers`, or, under an mpirun started by hand, the
  -- ranks it started (`world`). Every per-worker setting is checked against it, here,
  -- before any rank starts.
  local n = world or exp.workers
  local B = exp.global_batch
  -- Where a per-worker mismatch came from: the setting itself when the command line
  -- gave it, else the command line's workers= (--workers N) when that gave the count.
  local function at(path)
    if not origin_of(ctx, path) and ctx.origin.workers and not world then return 'workers' end
    return path
  end
  local function per_worker(path, list, hint)
    if list and #list ~= n then
      fail(ctx, at(path), string.format('%s has %d entries for %d workers', path, #list, n),
           hint or string.format('give %s one entry per worker (%d)', path, n))
    end
  end

  -- The global batches a plan may carry: B alone unless policy.global_batch says.
  local set_range = exp.policy.global_batch
  local range = { min = set_range.min > 0 and set_range.min or B, max = set_range.max > 0 and set_range.max or B }
  if not (range.min <= B and B <= range.max) then
    fail(ctx, 'policy.global_batch',
         string.format('policy.global_batch = {min = %d, max = %d} does not hold global_batch = %d', range.min,
                       range.max, B),
         'make min <= global_batch <= max: global_batch is where training starts and what lr is given for')
  end
  if B < n then
    fail(ctx, at('global_batch'),
         string.format("'global_batch' must be >= the number of workers (%d), got %d", n, B),
         string.format('set global_batch to %d or more, so that every worker gets samples, or run fewer workers', n))
  end

  local data = exp.data
  local builtin = M.datasets[data.name]
  local data_defaults = M.schema.fields.data.fields
  -- data.shape or data.classes set: only synthetic data takes them.
  local shape_given = not same_list(data.shape, data_defaults.shape.default)
                      or data.classes ~= data_defaults.classes.default
  -- A data set's own folder where data.dir was left at fashion-mnist's.
  if builtin and builtin.dir and not ctx.origin['data.dir'] and data.dir == data_defaults.dir.default then
    data.dir = builtin.dir
  end
  if builtin then
    if shape_given and (not same_list(data.shape, builtin.shape) or data.classes ~= builtin.classes) then
      fail(ctx, ctx.origin['data.shape'] and 'data.shape' or 'data.classes',
           string.format('data.shape and data.classes are fixed for %s (%s, %d classes)', data.name,
                         table.concat(builtin.shape, 'x'), builtin.classes),
           "leave them out, or use data.name = 'synthetic'")
    end
    data.shape, data.classes = deep_copy(builtin.shape), builtin.classes
  end
  -- Only a data set stored as rows of bytes can be held on the device
  -- (engine/train/device_input.hpp): said before anything starts, not by every rank.
  local not_rows = {
    synthetic = 'its samples are computed as they are drawn',
    tokens = 'its tokens are uint16, memory-mapped from files of any size',
    cifar10 = 'its images are normalised per channel and augmented as they are gathered',
  }
  if data.on_device == 'always' and not_rows[data.name] then
    fail(ctx, 'data.on_device',
         string.format("data.on_device = 'always' cannot hold the %s data set on the device: it is not stored as a "
                         .. 'row of bytes per sample (%s)', data.name, not_rows[data.name]),
         "set data.on_device = 'auto': batches are then gathered on the host and uploaded")
  end
  local input, classes = data.shape, data.classes
  if ctx.validation_listed and data.name ~= 'tokens' then
    fail(ctx, 'data.validation', string.format("'data.validation' lists files (%s), which only data.name = 'tokens' "
                                                 .. "reads; for %s it is a number", ctx.validation_listed, data.name),
         data.name == 'text' and 'give the held-out fraction, e.g. data.validation = 0.1'
           or "leave data.validation out, or set data.name = 'tokens'")
  end
  -- A language model's data sets its input ({data.seq_len}) and classes; the model's
  -- context is the data's window: a second value could only disagree.
  local function sequence_data(what, classes_text, classes_hint)
    if shape_given then
      fail(ctx, ctx.origin['data.shape'] and 'data.shape' or 'data.classes',
           string.format('data.shape and data.classes are set by the %s data set ({data.seq_len}, %s)', what,
                         classes_text),
           'leave them out; data.seq_len sets the window of one sample' .. classes_hint)
    end
    local args = exp.model_args
    if args.seq_len ~= nil and args.seq_len ~= data.seq_len then
      fail(ctx, 'model_args.seq_len', string.format('model_args.seq_len = %s differs from data.seq_len = %d',
                                                    show(args.seq_len), data.seq_len),
           'leave model_args.seq_len out (the model reads its context length from its input, {data.seq_len}), or '
             .. 'set data.seq_len instead')
    end
  end
  if data.name == 'text' then
    sequence_data('text', string.format('%d byte values', M.text_classes), '')
    if #data.files == 0 then
      fail(ctx, 'data.files', "'data.files' is empty: the text data set has nothing to read",
           "list text files or folders, e.g. data.files = {'/usr/share/games/fortunes'} (apt-get install fortunes)")
    end
    input, classes = { data.seq_len }, M.text_classes
  elseif data.name == 'tokens' then
    sequence_data('tokens', 'data.vocab classes', ', data.vocab the classes')
    for _, split in ipairs({ { 'train', data.train, 'train.bin' }, { 'validation', data.validation_files, 'val.bin' } }) do
      if #split[2] == 0 then
        fail(ctx, 'data.' .. split[1], string.format("'data.%s' lists no files: the tokens data set needs both splits",
                                                     split[1]),
             string.format("list token files or globs, e.g. data.%s = {'%s'} (tools/data/text_to_tokens.py writes "
                             .. 'them from text files)', split[1], split[3]))
      end
    end
    input, classes = { data.seq_len }, data.vocab
  else
    -- The text's sizes depend on its files: the engine checks global_batch against
    -- them when it reads them.
    local train_size = builtin and builtin.train_size or data.train_size
    local test_size = builtin and builtin.test_size or data.test_size
    if B > train_size then
      fail(ctx, 'global_batch', string.format("'global_batch' must be <= %d, the training samples of %s, got %d",
                                              train_size, data.name, B),
           'lower global_batch: an iteration draws its global batch from the training set without repeats')
    end
    if range.max > train_size then
      fail(ctx, 'policy.global_batch.max', string.format("'policy.global_batch.max' must be <= %d, the training "
                                                          .. 'samples of %s, got %d', train_size, data.name, range.max),
           'lower policy.global_batch.max: an iteration draws its global batch from the training set without repeats')
    end
    -- An evaluation batch past the test set evaluates it at once, as the test set's
    -- size does, without allocating room for samples that are not there.
    exp.eval_batch = math.min(exp.eval_batch, test_size)
  end

  local plan = exp.plan
  if plan.kind == 'fixed' and not plan.batches then
    fail(ctx, 'plan.kind', "plan.kind = 'fixed' needs plan.batches",
         string.format('add plan.batches = {b0, b1, ...}: one local batch per worker (%d), summing to global_batch (%d)',
                       n, B))
  end
  if plan.batches and plan.kind ~= 'fixed' then
    fail(ctx, 'plan.batches', string.format("plan.batches is only read with plan.kind = 'fixed', not '%s'", plan.kind),
         "set plan.kind = 'fixed' to train with these local batches, or remove plan.batches")
  end
  if plan.kind == 'fixed' then
    local sum = 0
    for _, b in ipairs(plan.batches) do sum = sum + b end
    if #plan.batches ~= n then
      fail(ctx, at('plan.batches'), string.format('plan.batches has %d local batches (summing to %d) for %d workers',
                                                  #plan.batches, sum, n),
           string.format('give plan.batches one local batch per worker (%d), summing to global_batch (%d)', n, B))
    end
    if sum ~= B then
      fail(ctx, 'plan.batches', string.format('plan.batches sums to %d, not global_batch = %d', sum, B),
           string.format('make the %d local batches add up to %d, or set global_batch = %d', n, B, sum))
    end
  end

  local emu = exp.emulation
  if plan.kind == 'proportional' and not emu.enabled then
    fail(ctx, 'plan.kind', "plan.kind = 'proportional' divides the global batch by emulated speeds, but no emulation "
                              .. 'is configured', "set emulation.speeds = {...} (one per worker), or plan.kind = 'equal'")
  end
  if emu.speeds and emu.workers then
    fail(ctx, 'emulation.speeds', 'emulation.speeds and emulation.workers both set',
         'give speeds either as emulation.speeds = {...} or as emulation.workers[i].speed')
  end
  for _, key in ipairs({ 'duration', 'speed' }) do
    local range = emu.random[key]
    local path = 'emulation.random.' .. key
    if range and #range ~= 2 then
      fail(ctx, path, string.format("'%s' must be {min, max}, got %d values", path, #range),
           string.format('write %s = {min, max}', path))
    end
    if range and range[1] > range[2] then
      fail(ctx, path, string.format("'%s' must be {min, max} with min <= max, got {%g, %g}", path, range[1], range[2]),
           string.format('write %s = {%g, %g}', path, range[2], range[1]))
    end
  end
  -- A measured curve (a profile, the memory by batch): as many values as batches,
  -- batches increasing.
  local function curve(path, batch, values, values_key)
    if batch == nil and values == nil then return end
    if batch == nil or values == nil or #batch ~= #values or #batch == 0 then
      fail(ctx, path, string.format('%s needs batch and %s lists of the same length (got %d and %d values)', path,
                                    values_key, batch and #batch or 0, values and #values or 0),
           'take both lists from `tandem profile` (its batch and ' .. (values_key == 'mb' and 'memory_mb' or 'ms') .. ')')
    end
    for i = 2, #batch do
      if batch[i] <= batch[i - 1] then
        fail(ctx, path .. '.batch', string.format("'%s.batch' must increase, got %g after %g", path, batch[i],
                                                  batch[i - 1]), 'list the measured batches from small to large')
      end
    end
  end
  if emu.enabled then
    per_worker('emulation.speeds', emu.speeds)
    per_worker('emulation.comm_delay_ms', emu.comm_delay_ms)
    per_worker('emulation.workers', emu.workers,
               string.format('give emulation.workers one entry per worker (%d), or leave it out to run every worker '
                             .. 'at speed 1', n))
    for i, e in ipairs(emu.events or {}) do
      if e.worker >= n then
        fail(ctx, string.format('emulation.events[%d].worker', i),
             string.format("'emulation.events[%d].worker' must be a worker from 0 to %d, got %d", i, n - 1, e.worker),
             'name the worker by its rank, counted from 0')
      end
      if e.to and e.to <= e.from then
        fail(ctx, string.format('emulation.events[%d].to', i),
             string.format("'emulation.events[%d].to' must be > from (%d), got %d", i, e.from, e.to),
             'to is the iteration the slowdown ends before; leave it out to last until the end of the run')
      end
    end
  end
  for i, w in ipairs(emu.workers or {}) do
    local path = string.format('emulation.workers[%d]', i)
    if w.profile and (w.profile.batch or w.profile.ms) then
      if w.speed then
        fail(ctx, path .. '.speed', string.format('%s has both a speed and a profile', path),
             'a measured profile replaces the speed factor: remove one of them')
      end
      curve(path .. '.profile', w.profile.batch, w.profile.ms, 'ms')
    end
  end
  curve('emulation.memory', emu.memory.batch, emu.memory.mb, 'mb')
  for i, f in ipairs(exp.faults or {}) do
    if f.rank >= n then
      fail(ctx, string.format('faults[%d].rank', i),
           string.format("'faults[%d].rank' must be a worker from 0 to %d, got %d", i, n - 1, f.rank),
           'name the worker by its rank, counted from 0')
    end
  end

  -- A policy is a name (policies/NAME.lua or scripts/policies/NAME.lua) or a path,
  -- looked for beside the experiment, in TANDEM_PATH, the working directory, then
  -- tandem's tree (tandem.search_path).
  local pol = exp.policy
  if pol.file then
    local found, tried = require('tandem.search_path').find_policy(pol.file, source ~= 'experiment' and source or nil)
    if found then pol.file = found
    else
      fail(ctx, 'policy.file', string.format("policy '%s' not found (or not a readable file; looked for %s)", pol.file,
                                             table.concat(tried, ', ')),
           'name a policy in scripts/policies/ (equal, proportional, boa, lbb), give the path of a .lua file, '
             .. 'or add its folder to TANDEM_PATH')
    end
  end

  local sync = exp.sync
  per_worker('sync.groups', sync.groups, 'give one group number per worker, e.g. sync.groups = {1, 1, 2, 2}')
  -- The relaxed modes' server and local steps are SGD over a classifier's mean
  -- (engine/train/plan.hpp bsp_only_reason says the same at run time).
  if sync.mode ~= 'bsp' then
    local why = exp.optimizer ~= 'sgd' and "optimizer = '" .. exp.optimizer .. "'"
             or exp.clip_grad_norm > 0 and 'clip_grad_norm'
             or (exp.data.name == 'text' or exp.data.name == 'tokens') and "data.name = '" .. exp.data.name .. "'"
    if why then
      fail(ctx, 'sync.mode', string.format("sync.mode = '%s' trains with SGD on a classifier only; %s trains bsp",
                                           sync.mode, why),
           "use sync.mode = 'bsp' (the default), or optimizer = 'sgd' without clip_grad_norm")
    end
  end
  if sync.groups and sync.mode == 'grouped' then
    local seen, top = {}, 0
    for _, g in ipairs(sync.groups) do seen[g], top = true, math.max(top, g) end
    for g = 1, top do
      if not seen[g] then
        fail(ctx, 'sync.groups', string.format('sync.groups has no worker in group %d: groups are numbered 1..%d '
                                                  .. 'without gaps', g, top),
             'number the groups 1, 2, ... without gaps, e.g. sync.groups = {1, 1, 2, 2}')
      end
    end
  end
  if sync.k > n then
    fail(ctx, at('sync.k'), string.format("'sync.k' must be between 0 and the number of workers (%d), got %d", n, sync.k),
         'set sync.k between 1 and the number of workers (0: all)')
  end
  -- A fixed plan meets the sync mode's needs (Plan::validate, at its start). One
  -- worker is always bsp.
  if plan.kind == 'fixed' and n > 1 then
    if sync.mode == 'ksync' then
      for r, b in ipairs(plan.batches) do
        if b == 0 then
          fail(ctx, 'plan.batches', string.format("sync.mode = 'ksync' needs samples on every worker, but "
                                                     .. 'plan.batches gives worker %d none', r - 1),
               'give every worker a local batch of 1 or more, or use another sync.mode')
        end
      end
    elseif sync.mode == 'grouped' then
      local per_group = {}
      for r, b in ipairs(plan.batches) do
        local g = sync.groups and sync.groups[r] or 1
        per_group[g] = (per_group[g] or 0) + b
      end
      for g, total in pairs(per_group) do
        if total == 0 then
          fail(ctx, 'plan.batches', string.format("sync.mode = 'grouped': plan.batches gives group %d no samples", g),
               'give every group of sync.groups some samples: a group without any would push empty updates')
        end
      end
    end
  end
  per_worker('devices', exp.devices, "give one device per worker, e.g. devices = {'cuda', 'cpu'}, or set device for all")
  per_worker('policy.max_batch', pol.max_batch, 'give policy.max_batch one largest local batch per worker')

  -- Memory caps: a worker's device memory over the model's memory by local batch
  -- (linear between measured batches, extrapolated from the last two) bounds its
  -- local batch (times accumulate: micro-batches); the bound joins policy.max_batch,
  -- the smaller winning.
  local function memory_at(b, m)
    local count = #m.batch
    if count == 1 then return m.mb[1] * b / m.batch[1] end
    local i = 1
    while i < count - 1 and b > m.batch[i + 1] do i = i + 1 end
    local b0, b1, y0, y1 = m.batch[i], m.batch[i + 1], m.mb[i], m.mb[i + 1]
    return y0 + (y1 - y0) * (b - b0) / (b1 - b0)
  end
  local cap_source = {}  -- per worker, the setting that set its largest batch
  if pol.max_batch then
    for r = 1, n do cap_source[r] = 'policy.max_batch' end
  end
  for i, w in ipairs(emu.workers or {}) do
    if w.memory_mb then
      local m = emu.memory
      if not (m and m.batch and m.mb) then
        fail(ctx, string.format('emulation.workers[%d].memory_mb', i),
             'a worker memory cap needs the model\'s memory by batch: emulation.memory = {batch = {...}, mb = {...}}',
             'take both lists from `tandem profile` (its batch and memory_mb)')
      end
      local lo, hi = 0, range.max
      while lo < hi do  -- the largest batch that fits
        local mid = math.floor((lo + hi + 1) / 2)
        if memory_at(mid, m) <= w.memory_mb then lo = mid else hi = mid - 1 end
      end
      if lo < 1 then
        fail(ctx, string.format('emulation.workers[%d].memory_mb', i),
             string.format('worker %d\'s %g MB holds no sample of this model (%.1f MB at batch 1)', i - 1,
                           w.memory_mb, memory_at(1, m)), 'give it more memory or a smaller model')
      end
      -- The cap bounds what the worker holds at once: one micro-batch (of ceil(b / k)
      -- samples for k = its plan's micro-batches, or accumulate), not its local batch.
      lo = math.min(lo, range.max)
      pol.max_batch = pol.max_batch or {}
      for r = 1, n do pol.max_batch[r] = pol.max_batch[r] or range.max end
      if lo < pol.max_batch[i] then
        pol.max_batch[i] = lo
        cap_source[i] = string.format('emulation.workers[%d].memory_mb', i)
      end
    end
  end
  -- A fixed plan within every worker's bounds.
  if plan.kind == 'fixed' then
    for r, b in ipairs(plan.batches) do
      local k = plan.micro_batches and plan.micro_batches[r] or exp.accumulate
      local cap = pol.max_batch and pol.max_batch[r] and pol.max_batch[r] * k
      if cap and b > cap then
        local why = cap_source[r] == 'policy.max_batch' and 'policy.max_batch' or
                      string.format('%s = %g MB with emulation.memory', cap_source[r], emu.workers[r].memory_mb)
        fail(ctx, 'plan.batches', string.format("'plan.batches[%d]' must be <= %d, worker %d's largest local batch "
                                                   .. 'in %d micro-batch(es) (%s), got %d', r, cap, r - 1, k, why, b),
             string.format('give worker %d at most %d samples and the others the rest of global_batch, give it '
                             .. 'more micro-batches (plan.micro_batches), or raise %s', r - 1, cap, cap_source[r]))
      end
      if b < pol.min_batch then
        fail(ctx, 'plan.batches', string.format("'plan.batches[%d]' must be >= policy.min_batch = %d, got %d", r,
                                                pol.min_batch, b),
             'give every worker at least policy.min_batch samples, or lower policy.min_batch')
      end
    end
  end

  -- A policy's bounds leave room for some plan (the policy host checks the same when
  -- it starts; here the settings are named, before any rank starts).
  if pol.file then
    local lo, hi = 0, 0
    for r = 1, n do
      local cap = pol.max_batch and pol.max_batch[r] or range.max
      local source = cap_source[r] or 'global_batch'
      if pol.min_batch > cap then
        fail(ctx, 'policy.min_batch',
             string.format("no plan can satisfy the policy's bounds: 'policy.min_batch' must be <= every worker's "
                             .. 'largest local batch, but worker %d\'s is %d (%s), got %d', r - 1, cap, source,
                           pol.min_batch), 'lower policy.min_batch, or raise ' .. source)
      end
      lo, hi = lo + pol.min_batch, hi + cap
    end
    if lo > B then
      fail(ctx, 'policy.min_batch',
           string.format("no plan can satisfy the policy's bounds: 'policy.min_batch' must be <= %d (global_batch "
                           .. '%d over %d workers), got %d', math.floor(B / n), B, n, pol.min_batch),
           'lower policy.min_batch, or raise global_batch')
    end
    -- A worker's cap bounds its micro-batch: it may take up to 1024 of them a step
    -- (engine/train/plan.hpp kMaxMicroBatches).
    if hi * 1024 < B then
      fail(ctx, 'policy.max_batch',
           string.format("no plan can satisfy the policy's bounds: the workers' largest micro-batches add up to %d, "
                           .. 'less than global_batch = %d even in 1024 micro-batches each', hi, B),
           'raise policy.max_batch (or the workers\' emulation.workers[i].memory_mb), or lower global_batch')
    end
  end

  -- A relative trace path is read relative to the working directory, else to the
  -- experiment file's folder.
  if emu.speed_trace then
    if emu.speed_trace:sub(1, 1) ~= '/' and not file_exists(emu.speed_trace) then
      local beside = dirname(source) .. '/' .. emu.speed_trace
      if file_exists(beside) then emu.speed_trace = beside end
    end
    if emu.enabled and not file_exists(emu.speed_trace) then
      fail(ctx, 'emulation.speed_trace', string.format("emulation.speed_trace '%s' not found (or not a readable file)",
                                                       emu.speed_trace),
           'give a file with one line per iteration and one speed multiplier per worker; a relative path is looked '
             .. 'up where tandem runs, then beside the experiment file')
    end
  end

  exp.model = M.build_model(ctx, exp, input, classes)
  exp.source = source
  exp.overrides = deep_copy(overrides)
  return exp
end

return M
