"""简体中文 for the core's messages (``book``, ``probes``, ``runtime``, ``native``): each key is
the English f-string as written in the source (``ast.unparse``'s spelling of each field), each
value its Chinese, with the same fields. ``tests/test_i18n.py`` checks that every message the
core raises has one.

Terms follow the Chinese edition 《从零构建大模型》: token 词元, embedding 嵌入, LayerNorm 层归一化,
attention 注意力, feed-forward 前馈网络, shortcut connection 快捷连接, prompt 提示词, seed 随机种子,
weights 权重, variant 变体, step 步, batch 批次, context 上下文. Config keys and code names stay
as they are.

``FILLED_IN``: keys that are not the source's own f-strings but the messages some of them make
once a field is filled in with a sentence of its own ("Did you mean ...?", "... or ...", the
parts of a shape mismatch), so that the whole message is matched, and words that the core
passes as a field's value ("checkpoint", "the file"). ``translate`` tries the keys with the
most fixed text first, so these win over the plain templates below them.
"""

FILLED_IN: dict[str, str] = {
    # book/config.py: "Unknown config key '{key}'.{did_you_mean} ..." with and without a hint
    "Unknown config key '{key}'. Did you mean '{hint}'? Known keys: {known}.":
        "未知的配置键 '{key}'。你是不是想用 '{hint}'？已知的键：{known}。",
    "Unknown config key '{key}'. Known keys: {known}.":
        "未知的配置键 '{key}'。已知的键：{known}。",
    "Unknown preset '{name}'. Did you mean '{hint}'? Presets: {presets}.":
        "未知的预设 '{name}'。你是不是想用 '{hint}'？可用的预设：{presets}。",
    "Unknown preset '{name}'. Presets: {presets}.":
        "未知的预设 '{name}'。可用的预设：{presets}。",
    # runtime/weights.py: the same for a config given with a checkpoint
    "Unknown config key '{key}'. Did you mean '{hint}'? Known keys: the book's ({book}) or "
    "Hugging Face's ({hf}).":
        "未知的配置键 '{key}'。你是不是想用 '{hint}'？已知的键：本书的（{book}）或 Hugging Face 的"
        "（{hf}）。",
    "Unknown config key '{key}'. Known keys: the book's ({book}) or Hugging Face's ({hf}).":
        "未知的配置键 '{key}'。已知的键：本书的（{book}）或 Hugging Face 的（{hf}）。",
    # book/config.py _head_message: {dims} is "{lower} or {upper}"
    "emb_dim ({emb_dim}) must be divisible by n_heads ({n_heads}) so that every head gets the "
    "same size. Head counts that work with emb_dim={emb_dim}: {divisors}; or keep {n_heads} "
    "heads with emb_dim {lower} or {upper}.":
        "emb_dim（{emb_dim}）必须能被 n_heads（{n_heads}）整除，每个头才能分到相同的大小。"
        "与 emb_dim={emb_dim} 相配的头数：{divisors}；或者保留 {n_heads} 个头，把 emb_dim 设为 "
        "{lower} 或 {upper}。",
    # runtime/cache.py check_budget: {what} is "pretrained GPT-2 XL" or "checkpoint (name)"
    "This pretrained {name} needs {need} MB for its weights ({dtype}), but the memory budget is "
    "{budget} MB (set {env} to change it). {advice}":
        "预训练 {name} 的权重需要 {need} MB（{dtype}），但内存预算只有 {budget} MB"
        "（可设置 {env} 来修改）。{advice}",
    "This checkpoint ({name}) needs {need} MB for its weights ({dtype}), but the memory budget "
    "is {budget} MB (set {env} to change it). {advice}":
        "这个检查点（{name}）的权重需要 {need} MB（{dtype}），但内存预算只有 {budget} MB"
        "（可设置 {env} 来修改）。{advice}",
    # book/load_weights.py describe_differences: its parts, in each combination
    "The weights do not fit this model. missing from {where} ({n_missing}): {missing}.":
        "权重与此模型不匹配。{where} 中缺少 {n_missing} 个：{missing}。",
    "The weights do not fit this model. in {where} but not in the model ({n_extra}): {extra}.":
        "权重与此模型不匹配。{where} 中有而模型中没有的 {n_extra} 个：{extra}。",
    "The weights do not fit this model. wrong shape ({n_wrong}): {wrong}.":
        "权重与此模型不匹配。形状不对的 {n_wrong} 个：{wrong}。",
    "The weights do not fit this model. missing from {where} ({n_missing}): {missing}. in "
    "{where} but not in the model ({n_extra}): {extra}.":
        "权重与此模型不匹配。{where} 中缺少 {n_missing} 个：{missing}；{where} 中有而模型中没有的 "
        "{n_extra} 个：{extra}。",
    "The weights do not fit this model. missing from {where} ({n_missing}): {missing}. wrong "
    "shape ({n_wrong}): {wrong}.":
        "权重与此模型不匹配。{where} 中缺少 {n_missing} 个：{missing}；形状不对的 {n_wrong} 个："
        "{wrong}。",
    "The weights do not fit this model. in {where} but not in the model ({n_extra}): {extra}. "
    "wrong shape ({n_wrong}): {wrong}.":
        "权重与此模型不匹配。{where} 中有而模型中没有的 {n_extra} 个：{extra}；形状不对的 "
        "{n_wrong} 个：{wrong}。",
    "The weights do not fit this model. missing from {where} ({n_missing}): {missing}. in "
    "{where} but not in the model ({n_extra}): {extra}. wrong shape ({n_wrong}): {wrong}.":
        "权重与此模型不匹配。{where} 中缺少 {n_missing} 个：{missing}；{where} 中有而模型中没有的 "
        "{n_extra} 个：{extra}；形状不对的 {n_wrong} 个：{wrong}。",
    # words the core passes as a field's value
    "model": "模型",
    "checkpoint": "检查点",
    "the file": "该文件",
    "finished": "完成",        # "This job is {self.status}; start a new one."
    "cancelled": "取消",
    "failed": "失败",
    # --- runtime/weights.py, book/load_weights.py: the words of a field ----------------
    "a tensor's bytes do not follow the one before it":
        "某个张量的字节没有紧接着前一个张量",
    "a tensor's bytes do not match its shape and dtype":
        "某个张量的字节与它的形状和 dtype 不符",
    "its tensors do not cover the file exactly: it is cut short, or has bytes "
        "after its last tensor":
        "它的张量没有恰好覆盖整个文件：文件不完整，或者最后一个张量之后还有多余的字节",
    "its header is not JSON":
        "它的文件头不是 JSON",
    "its header does not describe its tensors":
        "它的文件头没有正确描述其中的张量",
    "a whole number ≥ 1":
        "≥ 1 的整数",
    "a name (text)":
        "名称（文本）",
    "a number":
        "数",
}

ZH_CORE: dict[str, str] = {
    **FILLED_IN,
    # --- book/config.py ----------------------------------------------------------------------
    "{name} must be a whole number, got {value!r} ({type(value).__name__}).":
        "“{name}”必须是整数，收到的是 {value!r}（{type(value).__name__}）。",
    "{name} must be True or False, got {value!r} ({type(value).__name__}).":
        "“{name}”必须是 True 或 False，收到的是 {value!r}（{type(value).__name__}）。",
    "{name} must be one of {options} (got {value!r}).":
        "“{name}”必须是 {options} 之一（收到 {value!r}）。",
    "drop_rate must be a number, got {value!r} ({type(value).__name__}).":
        "drop_rate 必须是数字，收到的是 {value!r}（{type(value).__name__}）。",
    "drop_rate must be in [0, 1): 0 keeps every activation, 0.1 is the book's value (got "
    "{value!r}).":
        "drop_rate 必须在 [0, 1) 之内：0 表示保留所有激活值，0.1 是本书的取值（收到 {value!r}）。",
    "Unknown preset '{name}'.{did_you_mean} Presets: {', '.join(PRESETS)}.":
        "未知的预设 '{name}'。{did_you_mean} 可用的预设：{', '.join(PRESETS)}。",
    "RoPE rotates pairs of dimensions, so the head size emb_dim / n_heads must be even; "
    "{self.emb_dim} / {self.n_heads} = {self.head_dim} is odd. Choose another head count or "
    "emb_dim, or use pos_encoding='learned'.":
        "RoPE 成对地旋转维度，所以头的大小 emb_dim / n_heads 必须是偶数；{self.emb_dim} / "
        "{self.n_heads} = {self.head_dim} 是奇数。请换一个头数或 emb_dim，或使用 "
        "pos_encoding='learned'。",
    "A config must be a dict or GPTConfig, got {type(d).__name__}.":
        "配置必须是 dict 或 GPTConfig，收到的是 {type(d).__name__}。",
    "{name} must be a whole number, got {value!r}.":
        "“{name}”必须是整数，收到的是 {value!r}。",
    "dtype must be one of {', '.join(BYTES_PER_PARAM)} (got {dtype!r}).":
        "dtype 必须是 {', '.join(BYTES_PER_PARAM)} 之一（收到 {dtype!r}）。",
    "{name} must be at least 1 (got {value}).":
        "“{name}”必须至少为 1（收到 {value}）。",
    "Unknown config key '{key}'.{did_you_mean} Known keys: {', '.join(known)}.":
        "未知的配置键 '{key}'。{did_you_mean} 已知的键：{', '.join(known)}。",
    "emb_dim ({emb_dim}) must be divisible by n_heads ({n_heads}) so that every head gets the "
    "same size. Head counts that work with emb_dim={emb_dim}: {', '.join(map(str, divisors))}; "
    "or keep {n_heads} heads with emb_dim {dims}.":
        "emb_dim（{emb_dim}）必须能被 n_heads（{n_heads}）整除，每个头才能分到相同的大小。"
        "与 emb_dim={emb_dim} 相配的头数：{', '.join(map(str, divisors))}；或者保留 {n_heads} "
        "个头，把 emb_dim 设为 {dims}。",
    "output head: tied to the token embedding (the same {self.token_embedding:,} weights, "
    "stored and counted once)":
        "输出头：与词元嵌入绑定（同一组 {self.token_embedding:,} 个权重，只存储、只计数一次）",
    # --- book/curves.py ----------------------------------------------------------------------
    "x_min must be smaller than x_max (got x_min={x_min!r}, x_max={x_max!r}); for example "
    "x_min=-4, x_max=4.":
        "x_min 必须小于 x_max（收到 x_min={x_min!r}，x_max={x_max!r}）；例如 x_min=-4，x_max=4。",
    "points must be a whole number (got {points!r}).":
        "points 必须是整数（收到 {points!r}）。",
    "points must be between {MIN_POINTS} and {MAX_POINTS} (got {points}).":
        "points 必须在 {MIN_POINTS} 到 {MAX_POINTS} 之间（收到 {points}）。",
    "Choose at least one activation function.": "请至少选择一个激活函数。",
    "{label} must be a number (got {value!r}).": "“{label}”必须是数字（收到 {value!r}）。",
    "{label} must be a finite number (got {value!r}).":
        "“{label}”必须是有限的数（收到 {value!r}）。",
    "{label} must lie between {-X_LIMIT:g} and {X_LIMIT:g} (got {value!r}).":
        "“{label}”必须在 {-X_LIMIT:g} 到 {X_LIMIT:g} 之间（收到 {value!r}）。",
    "Unknown activation {name!r}; choose from {', '.join(ACTIVATION_FUNCTIONS)}.":
        "未知的激活函数 {name!r}；请从 {', '.join(ACTIVATION_FUNCTIONS)} 中选择。",
    # --- book/generate.py --------------------------------------------------------------------
    "max_new_tokens must be a whole number ≥ 0 (got {max_new_tokens!r}).":
        "max_new_tokens 必须是 ≥ 0 的整数（收到 {max_new_tokens!r}）。",
    "temperature must be a finite number ≥ 0; 0 means greedy decoding (got {temperature!r}).":
        "temperature（温度）必须是 ≥ 0 的有限数；0 表示贪心解码（收到 {temperature!r}）。",
    "seed must be a whole number ≥ 0 (got {seed!r}).":
        "seed（随机种子）必须是 ≥ 0 的整数（收到 {seed!r}）。",
    "show_top must be a whole number ≥ 1 (got {show_top!r}).":
        "show_top 必须是 ≥ 1 的整数（收到 {show_top!r}）。",
    "The prompt has no tokens: type some text first.": "提示词中没有词元：请先输入一些文字。",
    "Token id {bad[0]} is outside this model's vocabulary (0 ... {cfg.vocab_size - 1}).":
        "词元 ID {bad[0]} 超出了此模型的词表范围（0 ... {cfg.vocab_size - 1}）。",
    "top_k must be a whole number ≥ 1, or empty for no limit (got {top_k!r}).":
        "top_k 必须是 ≥ 1 的整数，留空表示不限制（收到 {top_k!r}）。",
    "top_k ({top_k}) is larger than the vocabulary ({vocab_size} tokens); use at most "
    "{vocab_size}, or leave it empty.":
        "top_k（{top_k}）大于词表大小（{vocab_size} 个词元）；最多用 {vocab_size}，或留空。",
    # --- book/gradients.py, book/kv_cache.py -------------------------------------------------
    "The gradient demo needs at least two tokens: one to predict from, one to predict.":
        "梯度演示至少需要两个词元：一个作为输入，一个作为预测目标。",
    "A KV cache needs room for at least one token (got {capacity}).":
        "KV 缓存至少要能容纳一个词元（收到 {capacity}）。",
    # --- book/load_weights.py ----------------------------------------------------------------
    "GPT-2 comes in {', '.join(GPT2_SIZES)} (got {size!r}).":
        "GPT-2 有这些规模：{', '.join(GPT2_SIZES)}（收到 {size!r}）。",
    "Only a GPT-2-shaped model (norm_placement='pre', shortcut on, pos_encoding='learned') can "
    "be saved in Hugging Face's GPT-2 layout.":
        "只有 GPT-2 结构的模型（norm_placement 为 pre、开启快捷连接、pos_encoding 为 learned）"
        "才能保存为 Hugging Face 的 GPT-2 布局。",
    "config.json describes a {hf.get('model_type')!r} model; the explorer loads GPT-2 models "
    "only (model_type 'gpt2').":
        "config.json 描述的是 {hf.get('model_type')!r} 模型；本工具只加载 GPT-2 模型"
        "（model_type 'gpt2'）。",
    "config.json's activation_function {activation!r} is not one the explorer has "
    "({', '.join(HF_ACTIVATIONS)}).":
        "config.json 中的 activation_function {activation!r} 不在本工具支持的范围内"
        "（{', '.join(HF_ACTIVATIONS)}）。",
    "The feed-forward width n_inner={inner} is not a multiple of n_embd={emb}; the explorer's "
    "ff_expansion must be a whole number.":
        "前馈网络宽度 n_inner={inner} 不是 n_embd={emb} 的整数倍；本工具的 ff_expansion 必须是"
        "整数。",
    "These weights were not given: {', '.join(left[:8])}.":
        "缺少这些权重：{', '.join(left[:8])}。",
    "The config says qkv_bias=False, but block {b}'s {name} bias in the file is not zero. Set "
    "qkv_bias to true in config.json.":
        "配置中 qkv_bias=False，但文件里块 {b} 的 {name} 偏置不为零。请在 config.json 中把 "
        "qkv_bias 设为 true。",
    "The weights do not fit this model. {'. '.join(parts)}.":
        "权重与此模型不匹配。{'. '.join(parts)}。",
    # --- book/model.py -----------------------------------------------------------------------
    "GPTModel expects token ids as a tensor of shape (batch, tokens).":
        "GPTModel 需要形状为 (batch, tokens) 的词元 ID 张量。",
    "The input has no tokens: give the model at least one token.":
        "输入中没有词元：请至少给模型一个词元。",
    "Token ids must be integers, got {in_idx.dtype}.":
        "词元 ID 必须是整数，收到的是 {in_idx.dtype}。",
    "stop_at_layer must be a whole number from 0 to {self.cfg.n_layers} (got "
    "{stop_at_layer!r}).":
        "stop_at_layer 必须是 0 到 {self.cfg.n_layers} 的整数（收到 {stop_at_layer!r}）。",
    "stop_at_layer runs part of the model: it cannot fill a KV cache.":
        "stop_at_layer 只运行模型的一部分：不能用来填充 KV 缓存。",
    "The KV cache holds {cache.capacity} positions; this input would need {length}. Make a "
    "cache with a larger capacity.":
        "KV 缓存只能容纳 {cache.capacity} 个位置；这个输入需要 {length} 个。请创建容量更大的缓存。",
    "The input has {length} tokens but this model's context_length is {limit}. Keep only the "
    "last {limit} tokens (generation crops the context for you).":
        "输入有 {length} 个词元，但此模型的 context_length 是 {limit}。请只保留最后 {limit} 个词元"
        "（生成时会自动为你截断上下文）。",
    "Token id {bad} is outside this model's vocabulary (0 ... {self.cfg.vocab_size - 1}).":
        "词元 ID {bad} 超出了此模型的词表范围（0 ... {self.cfg.vocab_size - 1}）。",
    # --- book/tokenizer.py -------------------------------------------------------------------
    "The GPT-2 tokenizer file {path} is corrupt: its sha256 is {actual}, expected "
    "{GPT2_TIKTOKEN_SHA256}. Restore it from the repository (git checkout -- "
    "assets/gpt2.tiktoken).":
        "GPT-2 分词器文件 {path} 已损坏：它的 sha256 是 {actual}，应为 {GPT2_TIKTOKEN_SHA256}。"
        "请从仓库恢复它（git checkout -- assets/gpt2.tiktoken）。",
    "Expected a sequence of token ids, got {type(ids).__name__} {ids!r}.":
        "需要一串词元 ID，收到的是 {type(ids).__name__} {ids!r}。",
    "Text to encode must be a string, got {type(text).__name__}.":
        "要编码的文本必须是字符串，收到的是 {type(text).__name__}。",
    "Token id {bad[0]} is outside the GPT-2 vocabulary [0, {self.n_vocab}); {len(bad)} invalid "
    "id(s) in total.":
        "词元 ID {bad[0]} 超出了 GPT-2 词表范围 [0, {self.n_vocab})；共有 {len(bad)} 个无效 ID。",
    "Token ids must be integers, got {type(i).__name__} {i!r}.":
        "词元 ID 必须是整数，收到的是 {type(i).__name__} {i!r}。",
    # --- book/training.py --------------------------------------------------------------------
    "The text is too short to train on: its training part (the first {train_ratio:.0%} of the "
    "characters) has {n_train:,} tokens, which gives {train_windows} window(s) of {max_length} "
    "tokens, but one batch needs {batch_size}. It needs about {need / train_ratio:,.0f} tokens "
    "in all (it has {total:,}): paste a longer text, or choose a shorter context or a smaller "
    "batch.":
        "文本太短，无法训练：它的训练部分（前 {train_ratio:.0%} 的字符）有 {n_train:,} 个词元，"
        "只能切出 {train_windows} 个长 {max_length} 个词元的窗口，但一个批次需要 {batch_size} 个。"
        "总共大约需要 {need / train_ratio:,.0f} 个词元（现有 {total:,} 个）：请粘贴更长的文本，"
        "或选择更短的上下文或更小的批次。",
    "The validation part of the text (the last {1 - train_ratio:.0%} of the characters) has "
    "{n_val:,} tokens, too few for one window of {max_length} tokens plus its next token. Give "
    "a text of at least about {(max_length + 1) / (1 - train_ratio):,.0f} tokens (it has "
    "{total:,}), or choose a shorter context.":
        "文本的验证部分（最后 {1 - train_ratio:.0%} 的字符）只有 {n_val:,} 个词元，不够组成一个 "
        "{max_length} 个词元的窗口外加它的下一个词元。请提供至少约 "
        "{(max_length + 1) / (1 - train_ratio):,.0f} 个词元的文本（现有 {total:,} 个），"
        "或选择更短的上下文。",
    # --- probes/tracing.py -------------------------------------------------------------------
    "top_k must be between 1 and {cfg.vocab_size} (got {top_k!r}).":
        "top_k 必须在 1 到 {cfg.vocab_size} 之间（收到 {top_k!r}）。",
    "The prompt has {len(ids)} tokens but this model's context_length is {cfg.context_length}. "
    "Shorten it to at most {cfg.context_length} tokens.":
        "提示词有 {len(ids)} 个词元，但此模型的 context_length 是 {cfg.context_length}。"
        "请把它缩短到最多 {cfg.context_length} 个词元。",
    "Layer {layer!r} does not exist: this model has layers 0 to {n_layers - 1}.":
        "第 {layer!r} 层不存在：此模型的层为 0 到 {n_layers - 1}。",
    "Position {p!r} does not exist: the input has positions 0 to {n_tokens - 1}.":
        "位置 {p!r} 不存在：输入的位置为 0 到 {n_tokens - 1}。",
    "Attention patterns are kept for the layers asked for only beyond "
    "{ATTENTION_ALL_LAYERS_MAX_TOKENS} tokens (this input has {n}).":
        "超过 {ATTENTION_ALL_LAYERS_MAX_TOKENS} 个词元时，只保留所请求各层的注意力模式"
        "（此输入有 {n} 个）。",
    "Some activations are inf or NaN: the values overflowed.":
        "部分激活值为 inf 或 NaN：数值溢出了。",
    # --- runtime/build.py --------------------------------------------------------------------
    "device must be 'auto', 'cpu', 'cuda' or 'mps' (got {device!r}).":
        "device 必须是 'auto'、'cpu'、'cuda' 或 'mps'（收到 {device!r}）。",
    "dtype must be one of {', '.join(DTYPES)} (got {dtype!r}).":
        "dtype 必须是 {', '.join(DTYPES)} 之一（收到 {dtype!r}）。",
    "bfloat16 is offered on a GPU only; on the CPU use float32.":
        "bfloat16 仅在 GPU 上提供；在 CPU 上请使用 float32。",
    "seed must be a whole number from 0 to 2**63 - 1 (got {seed!r}).":
        "seed（随机种子）必须是 0 到 2**63 - 1 的整数（收到 {seed!r}）。",
    "CUDA is not available on this machine; use device 'cpu' or 'auto'.":
        "这台机器上没有可用的 CUDA；请把 device 设为 cpu 或 auto。",
    "MPS is not available on this machine; use device 'cpu' or 'auto'.":
        "这台机器上没有可用的 MPS；请把 device 设为 cpu 或 auto。",
    # --- runtime/cache.py --------------------------------------------------------------------
    "{BUDGET_ENV} must be a positive number of MB (got {value!r}).":
        "{BUDGET_ENV} 必须是正的 MB 数（收到 {value!r}）。",
    "This {what or 'model'} needs {-(-need // 1024 ** 2):,} MB for its weights ({dtype}), but "
    "the memory budget is {budget_bytes // 1024 ** 2:,} MB (set {BUDGET_ENV} to change "
    "it). {advice}":
        "这个{what or 'model'}的权重需要 {-(-need // 1024 ** 2):,} MB（{dtype}），但内存预算只有 "
        "{budget_bytes // 1024 ** 2:,} MB（可设置 {BUDGET_ENV} 来修改）。{advice}",
    "hold keeps a GPTModel (got {type(model).__name__}).":
        "hold 只保存 GPTModel（收到 {type(model).__name__}）。",
    "{BUDGET_ENV} must be a number of MB (got {value!r}).":
        "{BUDGET_ENV} 必须是 MB 数（收到 {value!r}）。",
    "This trained model is no longer held (its session ended or used another one): press Use "
    "this model in the Train tab again, or build a model.":
        "这个训练好的模型已不再保留（它的会话已结束，或已换用另一个模型）：请在“训练”标签页中再次"
        "点击“使用此模型”，或构建一个模型。",
    "This model needs {-(-need // 1024 ** 2):,} MB; the sessions' own models already hold "
    "{others // 1024 ** 2:,} of the server's {self.budget_bytes // 1024 ** 2:,} MB budget "
    "({BUDGET_ENV}). Try again later, or use a smaller model.":
        "这个模型需要 {-(-need // 1024 ** 2):,} MB；各会话自己的模型已经占用了服务器 "
        "{self.budget_bytes // 1024 ** 2:,} MB 预算（{BUDGET_ENV}）中的 {others // 1024 ** 2:,} MB。"
        "请稍后再试，或使用更小的模型。",
    # WeightsSource.caption
    "from file {self.filename} (sha256 {(self.digest or '')[:8]}…)":
        "来自文件 {self.filename}（sha256 {(self.digest or '')[:8]}…）",
    "random, seed {self.seed}": "随机初始化（随机种子 {self.seed}）",
    "trained in the lab": "在训练实验室中训练",
    "pretrained {size} (OpenAI)": "预训练 {size}（OpenAI）",
    # check_budget's {advice}
    "Choose a smaller checkpoint, or raise the budget on a machine with more memory.":
        "请选择更小的检查点，或在内存更大的机器上提高预算。",
    "Choose fewer layers, a smaller emb_dim or a smaller vocabulary.":
        "请减少层数、减小 emb_dim 或缩小词表。",
    # --- runtime/training.py -----------------------------------------------------------------
    "{name} must be a positive number (got {value!r}).": "“{name}”必须是正数（收到 {value!r}）。",
    "The training text must be a string, got {type(text).__name__}.":
        "训练文本必须是字符串，收到的是 {type(text).__name__}。",
    "The training text is empty: paste some text, upload a .txt file, or use the default story.":
        "训练文本为空：请粘贴一些文本、上传一个 .txt 文件，或使用默认故事。",
    "The text contains NUL characters, which plain text never has: is it a binary file? Give "
    "plain text (.txt, UTF-8).":
        "文本中含有 NUL 字符，而纯文本里从不会有：它是二进制文件吗？请提供纯文本（.txt，UTF-8）。",
    "The lab trains on plain-text files ending in .txt; '{path.name}' is not one.":
        "训练实验室只接受以 .txt 结尾的纯文本文件；'{path.name}' 不是。",
    "'{path.name}' looks like a binary file (it contains NUL bytes), not plain text. Save it as "
    "a .txt file (UTF-8) and upload that.":
        "'{path.name}' 看起来是二进制文件（含有 NUL 字节），不是纯文本。请把它另存为 .txt 文件"
        "（UTF-8）再上传。",
    "{name} must be a whole number (got {value!r}).": "“{name}”必须是整数（收到 {value!r}）。",
    "{name} must be at least {low} (got {value!r}).":
        "“{name}”必须至少为 {low}（收到 {value!r}）。",
    "Choose one to {MAX_VARIANTS} variants to train side by side (got {len(variants)}).":
        "请选择 1 到 {MAX_VARIANTS} 个变体并排训练（收到 {len(variants)} 个）。",
    "{name} must be a number (got {value!r}).": "“{name}”必须是数字（收到 {value!r}）。",
    "The file '{path.name}' could not be read; upload it again.":
        "无法读取文件 '{path.name}'；请重新上传。",
    "'{path.name}' is not UTF-8 text (byte {e.start} cannot be read). Save it as UTF-8 and "
    "upload it again.":
        "'{path.name}' 不是 UTF-8 文本（第 {e.start} 个字节无法读取）。请另存为 UTF-8 后重新上传。",
    "Unknown variant '{name}'. Variants: {', '.join(VARIANT_CHOICES)}.":
        "未知的变体 '{name}'。可用的变体：{', '.join(VARIANT_CHOICES)}。",
    "seed must be a whole number ≥ 0 (got {self.seed!r}).":
        "seed（随机种子）必须是 ≥ 0 的整数（收到 {self.seed!r}）。",
    "The start context of the samples must be some text, such as the book's 'Every effort "
    "moves you'.":
        "样本的起始上下文必须是一段文字，例如本书的“Every effort moves you”。",
    "Each variant must be a Variant(label, config); make_variants() builds them from names.":
        "每个变体都必须是 Variant(label, config)；make_variants() 可以按名称构建它们。",
    "Variant '{v.label}' has vocab_size {config.vocab_size}, but the lab trains on GPT-2 tokens "
    "(ids up to {N_VOCAB - 1}): use vocab_size {N_VOCAB}.":
        "变体 '{v.label}' 的 vocab_size 是 {config.vocab_size}，但训练实验室使用 GPT-2 的词元"
        "（ID 最大为 {N_VOCAB - 1}）：请使用 vocab_size {N_VOCAB}。",
    "settings must be a TrainingSettings.": "settings 必须是 TrainingSettings。",
    "corpus must be a Corpus: default_corpus(), corpus_from_text() or corpus_from_file().":
        "corpus 必须是 Corpus：default_corpus()、corpus_from_text() 或 corpus_from_file()。",
    "This job is training in the background; stop it first.":
        "这个任务正在后台训练；请先停止它。",
    "This job was {self.status}; start a new one.": "这个任务已{self.status}；请开始一个新任务。",
    "There are {len(self.runs)} variants; choose one from 0 to {len(self.runs) - 1} (got "
    "{index!r}).":
        "共有 {len(self.runs)} 个变体；请选择 0 到 {len(self.runs) - 1} 中的一个（收到 {index!r}）。",
    "This session is already training: stop or cancel that job before starting another.":
        "此会话正在训练：请先停止或取消那个任务，再开始新的。",
    "This training is too large for this server: {len(variants)} variant(s) with {params:,} "
    "parameters in all x {settings.steps:,} steps = {work:.2g} parameter-steps; the limit is "
    "{self.max_param_steps:.2g} (setting {MAX_WORK_ENV}). Choose fewer steps, fewer variants or "
    "a smaller preset.":
        "这次训练对本服务器来说太大了：{len(variants)} 个变体共 {params:,} 个参数 × "
        "{settings.steps:,} 步 = {work:.2g} 参数·步；上限是 {self.max_param_steps:.2g}"
        "（设置项 {MAX_WORK_ENV}）。请减少步数或变体数，或选择更小的预设。",
    "{len(running)} training job(s) are running on this server, the most it runs at once "
    "({MAX_JOBS_ENV}). Try again in a minute.":
        "本服务器上正在运行 {len(running)} 个训练任务，已达同时运行的上限（{MAX_JOBS_ENV}）。"
        "请过一分钟再试。",
    "This session has no training job: press Train first.":
        "此会话没有训练任务：请先点击“训练”。",
    "{name} must be a positive number; the book uses {BOOK_SETTINGS[name]} (got {value!r}).":
        "“{name}”必须是正数；本书用的是 {BOOK_SETTINGS[name]}（收到 {value!r}）。",
    "This job is already training.": "这个任务已经在训练中。",
    "This job is {self.status}; start a new one.": "这个任务已{self.status}；请开始一个新任务。",
    "{len(running)} training job(s) are running on this server, the most it runs at once "
    "({MAX_JOBS_ENV}). Try Continue again in a minute.":
        "本服务器上正在运行 {len(running)} 个训练任务，已达同时运行的上限（{MAX_JOBS_ENV}）。"
        "请过一分钟再点“继续”。",
    # the job's message, a run's note, a trained variant's weights
    "diverged at step {step}: the loss became {loss_value} (NaN or infinite); training of this "
    "variant stopped there. A smaller learning rate or a warm-up may help.":
        "在第 {step} 步发散：损失变成了 {loss_value}（NaN 或无穷大）；这个变体的训练就此停止。"
        "较小的学习率或预热可能有帮助。",
    "diverged at step {step}: after its update the loss became NaN or infinite; training of "
    "this variant stopped there. A smaller learning rate or a warm-up may help.":
        "在第 {step} 步发散：更新之后损失变成了 NaN 或无穷大；这个变体的训练就此停止。"
        "较小的学习率或预热可能有帮助。",
    "Trained {self.steps_done} steps on {self.corpus.name}. Diverged: {', '.join(diverged)}.":
        "已训练 {self.steps_done} 步，语料：{self.corpus.name}。发散的变体：{', '.join(diverged)}。",
    "Trained {self.steps_done} steps on {self.corpus.name}.":
        "已训练 {self.steps_done} 步，语料：{self.corpus.name}。",
    "Training was cancelled.": "训练已取消。",
    "Stopped after {self.steps_done} steps; Continue resumes.":
        "已在第 {self.steps_done} 步后停止；点击“继续”可接着训练。",
    "Training failed at step {self.steps_done + 1}: {type(e).__name__}: {e}":
        "训练在第 {self.steps_done + 1} 步失败：{type(e).__name__}: {e}",
    "trained {steps} steps on {self.corpus.name}": "训练了 {steps} 步，语料：{self.corpus.name}",
    "trained {steps} step on {self.corpus.name}": "训练了 {steps} 步，语料：{self.corpus.name}",
    # --- runtime/weights.py ------------------------------------------------------------------
    "These weights are neither a GPT-2 checkpoint (wte.weight, h.0.attn...) nor the book's "
    "GPTModel (tok_emb.weight, trf_blocks.0.att...): found {', '.join(list(shapes)[:5])}.":
        "这些权重既不是 GPT-2 检查点（wte.weight、h.0.attn...），也不是本书的 GPTModel"
        "（tok_emb.weight、trf_blocks.0.att...）：找到的是 {', '.join(list(shapes)[:5])}。",
    "config must be a dict, a GPTConfig or the path of a config.json (got "
    "{type(config).__name__}).":
        "config 必须是 dict、GPTConfig 或 config.json 的路径（收到 {type(config).__name__}）。",
    "The GPT-2 size must be one of {SIZE_WORDS} (got {size!r}).":
        "GPT-2 规模必须是 {SIZE_WORDS} 之一（收到 {size!r}）。",
    "OpenAI's GPT-2 comes in sizes {SIZE_WORDS} (got {size!r}).":
        "OpenAI 的 GPT-2 有这几种规模：{SIZE_WORDS}（收到 {size!r}）。",
    "The file does not say how many attention heads the model has, and emb_dim={emb_dim} is "
    "not a multiple of GPT-2's head size 64. Put a config.json with n_heads beside it, or pass "
    "the config.":
        "文件没有说明模型有多少个注意力头，而 emb_dim={emb_dim} 不是 GPT-2 头大小 64 的整数倍。"
        "请在它旁边放一个带 n_heads 的 config.json，或传入配置。",
    "Give the path of a model.safetensors (or the book's model.pth) as text (got {path!r}).":
        "请以文本形式给出 model.safetensors（或本书的 model.pth）的路径（收到 {path!r}）。",
    "There is no file at {path}. Give the path of a model.safetensors (or the book's "
    "model.pth), or upload it.":
        "{path} 处没有文件。请给出 model.safetensors（或本书的 model.pth）的路径，或上传它。",
    "{path.name} is not a state_dict (a table of tensors), nor the book's checkpoint with "
    "'model_state_dict'.":
        "{path.name} 既不是 state_dict（张量表），也不是本书含 'model_state_dict' 的检查点。",
    "export_model saves a GPTModel (got {type(model).__name__}).":
        "export_model 只保存 GPTModel（收到 {type(model).__name__}）。",
    "Hugging Face's GPT-2 layout needs norm_placement 'pre', shortcuts on and pos_encoding "
    "'learned'; export this model in the book's layout (hf_layout=False) instead.":
        "Hugging Face 的 GPT-2 布局要求 norm_placement 为 pre、开启快捷连接、pos_encoding 为 "
        "learned；请改用本书的布局（hf_layout=False）导出此模型。",
    "Give the folder to export to as text (got {folder!r}).":
        "请以文本形式给出导出的文件夹（收到 {folder!r}）。",
    "{folder} is a file; choose a folder to export into.":
        "{folder} 是一个文件；请选择一个文件夹来导出。",
    "Could not download {WEIGHTS_FILE} of {repo_id}: {type(exc).__name__}: {exc}":
        "无法下载 {repo_id} 的 {WEIGHTS_FILE}：{type(exc).__name__}: {exc}",
    "{name}: tensor {tensor} is stored as {dtype}; the explorer reads "
    "{', '.join(SAFETENSORS_DTYPES)}.":
        "{name}：张量 {tensor} 以 {dtype} 存储；本工具能读取 {', '.join(SAFETENSORS_DTYPES)}。",
    "The weights file {source.filename} is no longer at {source.path}. Load it again (or "
    "upload it again).":
        "权重文件 {source.filename} 已不在 {source.path}。请重新加载（或重新上传）。",
    "{path.name} no longer matches the model it was chosen for; load it again.":
        "{path.name} 与当初选择它时的模型不再匹配；请重新加载。",
    "{path.name} has changed since it was chosen (its sha256 differs). Load it again.":
        "{path.name} 在被选择之后发生了变化（sha256 不同）。请重新加载。",
    "Could not make the folder {folder}: {exc.strerror or exc}.":
        "无法创建文件夹 {folder}：{exc.strerror or exc}。",
    "Could not write into {folder}: {exc.strerror or exc}. Free some disk space or choose "
    "another folder.":
        "无法写入 {folder}：{exc.strerror or exc}。请释放一些磁盘空间，或选择另一个文件夹。",
    "{n} is {s}, but the model's context_length is {cfg.context_length}.":
        "{n} 是 {s}，但模型的 context_length 是 {cfg.context_length}。",
    "{path.name} holds Python objects besides tensors, which could run code when loaded, so it "
    "was not opened. Save the weights alone: torch.save(model.state_dict(), 'model.pth'), or "
    "better, as safetensors.":
        "{path.name} 除了张量还含有 Python 对象，加载时可能会运行代码，所以没有打开它。请只保存权重："
        "torch.save(model.state_dict(), 'model.pth')，更好的做法是保存为 safetensors。",
    "Unknown config key '{key}'.{did_you_mean} Known keys: the book's "
    "({', '.join(BOOK_KEYS)}) or Hugging Face's ({', '.join(HF_KEYS)}).":
        "未知的配置键 '{key}'。{did_you_mean} 已知的键：本书的（{', '.join(BOOK_KEYS)}）或 "
        "Hugging Face 的（{', '.join(HF_KEYS)}）。",
    "The weights of {GPT2_BY_REPO[repo_id].page_name} are not on this machine and {why}. Either: (1) "
    "on a machine with internet run `hf download {repo_id} {WEIGHTS_FILE}` and copy the folder "
    "models--{repo_id.replace('/', '--')} into this machine's Hugging Face cache "
    "(~/.cache/huggingface/hub, or $HF_HOME/hub); or (2) download "
    "https://huggingface.co/{repo_id}/resolve/main/{WEIGHTS_FILE} and load that file with 'from "
    "file' (give its path, or upload it).":
        "{GPT2_BY_REPO[repo_id].page_name} 的权重不在这台机器上，而且{why}。可以：(1) 在能上网的机器上"
        "运行 `hf download {repo_id} {WEIGHTS_FILE}`，把文件夹 models--{repo_id.replace('/', '--')} "
        "复制到这台机器的 Hugging Face 缓存（~/.cache/huggingface/hub，或 $HF_HOME/hub）；或者 "
        "(2) 下载 https://huggingface.co/{repo_id}/resolve/main/{WEIGHTS_FILE}，再用“来自文件”"
        "加载它（给出路径，或上传）。",
    "HF_HUB_OFFLINE is set, so nothing is downloaded": "设置了 HF_HUB_OFFLINE，所以不会下载任何东西",
    "the Hugging Face hub cannot be reached from here": "从这里连不上 Hugging Face hub",
    # progress(fraction, text): a download, a conversion, a check (the Build tab's progress)
    "Downloading {label}: {self._done / 1000000.0:,.0f} of {total / 1000000.0:,.0f} MB":
        "正在下载 {label}：{self._done / 1000000.0:,.0f} / {total / 1000000.0:,.0f} MB",
    "Looking for {label} in the Hugging Face cache": "正在 Hugging Face 缓存中查找 {label}",
    "{label}: {WEIGHTS_FILE} is here": "{label}：{WEIGHTS_FILE} 已就绪",
    "Converting {source.filename} into the book's layout (the first time only)":
        "正在把 {source.filename} 转换为本书的布局（仅第一次）",
    "Loading {source.caption} into the book's GPTModel":
        "正在把 {source.caption} 加载到本书的 GPTModel 中",
    "Checking {Path(path).name}": "正在检查 {Path(path).name}",
    # FileInfo.assumptions
    "n_heads = {emb_dim // 64} (GPT-2's head size of 64; no config given)":
        "n_heads = {emb_dim // 64}（按 GPT-2 的头大小 64 推算；没有给出配置）",
    "the book's choices where weights cannot tell (norm before attention, shortcuts, GELU)":
        "权重无法判断之处采用本书的选择（注意力之前归一化、快捷连接、GELU）",
    # --- native ------------------------------------------------------------------------------
    "decoding: C, 2 threads": "解码：C，2 个线程",
    "decoding: PyTorch": "解码：PyTorch",
    "point_stats needs C-contiguous float32 x (T, width), float32 sums (6, T) and int64 counts":
        "point_stats 需要 C 连续的 float32 x (T, width)、float32 sums (6, T) 和 int64 counts",
    "a histogram of 1 to 255 bins plus the maximum: at most 256 slots":
        "直方图为 1 到 255 个区间再加上最大值：最多 256 个槽位",
    "many_point_stats needs what point_stats needs, for each activation":
        "many_point_stats 对每个激活值的要求与 point_stats 相同",
    # --- the hostile-requests issue: weights, configs, training ------------------------
    "The model's scores for the next token (its logits) are not numbers (NaN or "
        "infinite): its weights are broken, as after a training run that diverged. "
        "Build, load or train another model.":
        "模型对下一个词元的打分（logits）不是数（NaN 或无穷大）：它的权重已损坏，就像训练发散之后那样。请构建、加载或训练另一个模型。",
    "config.json's {key} must be {_KIND_WORDS[kind]} (got {json.dumps(value)[:40]}).":
        "config.json 中的 {key} 必须是{_KIND_WORDS[kind]}（收到 {json.dumps(value)[:40]}）。",
    "The text is {size:,} bytes; the lab trains on at most {max_bytes:,} bytes. "
        "Paste a shorter part of it.":
        "文本有 {size:,} 字节；训练实验室最多训练 {max_bytes:,} 字节的文本。请粘贴其中较短的一部分。",
    "'{path.name}' is {size:,} bytes; the lab trains on at most {max_bytes:,} "
        "bytes. Upload a shorter text.":
        "“{path.name}”有 {size:,} 字节；训练实验室最多训练 {max_bytes:,} 字节的文本。请上传较短的文本。",
    "Each variant can be trained once, but '{twice}' is chosen "
        "{names.count(twice)} times: choose different variants.":
        "每个变体只能训练一次，但“{twice}”被选了 {names.count(twice)} 次：请选择不同的变体。",
    "This finished job's models were let go to make room for another session's "
        "training; its curves stay. Train again to use or export a variant.":
        "为了给另一个会话的训练腾出空间，这个已结束任务的模型已被释放；它的曲线仍然保留。要使用或导出某个变体，请重新训练。",
    "Variant '{run.label}' diverged at step {run.diverged_at}: its weights give "
        "NaN or infinite outputs, so there is nothing to look at or generate from. "
        "Choose another variant, or train again with a smaller learning rate or a "
        "warm-up.":
        "变体“{run.label}”在第 {run.diverged_at} 步发散了：它的权重只给出 NaN 或无穷大"
        "的输出，既没什么可看，也无法生成。请选择另一个变体，或用更小的学习率或预热重新"
        "训练。",
    "This training needs about {need / 2 ** 20:,.0f} MB; the server has {max(0, "
        "self.budget_bytes - kept) / 2 ** 20:,.0f} MB of its training memory free now. "
        "Choose a smaller preset, batch or context, or try again later.":
        "这次训练大约需要 {need / 2 ** 20:,.0f} MB；服务器的训练内存现在只剩 {max(0, "
        "self.budget_bytes - kept) / 2 ** 20:,.0f} MB。请选择更小的预设、批次或上下文，"
        "或稍后再试。",
    "{name} is empty or cut short ({size:,} bytes): not a safetensors file. Copy "
        "or download it again.":
        "{name} 是空的或不完整（{size:,} 字节）：不是 safetensors 文件。请重新复制或下载。",
    "{name} is not a safetensors file, or it is cut short (its first bytes do not "
        "give a header that fits in it). Copy or download it again, or choose a "
        "model.safetensors file.":
        "{name} 不是 safetensors 文件，或者不完整（它开头的字节给出的文件头放不进这个文"
        "件）。请重新复制或下载，或选择一个 model.safetensors 文件。",
    "There is no file at {path}, only a folder or a device. Give the path of a "
        "model.safetensors (or the book's model.pth), or upload it.":
        "{path} 处没有文件，只有文件夹或设备。请给出 model.safetensors（或本书的 model.pth）的路径，或上传它。",
    "The config {name} is over {MAX_CONFIG_BYTES // 1024} KB: not a model config "
        "(GPT-2's config.json is about 1 KB).":
        "配置 {name} 超过 {MAX_CONFIG_BYTES // 1024} KB：不是模型配置（GPT-2 的 config.json 大约 1 KB）。",
    "The config {name} is not a table of settings (a JSON object such as "
        "{\"n_layer\": 12, ...}), so it cannot describe a model.":
        "配置 {name} 不是一张设置表（像 {\"n_layer\": 12, ...} 这样的 JSON 对象），所以描述不了模型。",
    "{STORE_LIMIT_ENV} must be a positive number of MB (got {value!r}).":
        "{STORE_LIMIT_ENV} 必须是正的 MB 数（收到 {value!r}）。",
    "{STORE_LIMIT_ENV} must be a number of MB (got {value!r}).":
        "{STORE_LIMIT_ENV} 必须是 MB 数（收到 {value!r}）。",
    "{name} holds weights that are not numbers (NaN or infinite) in {len(broken)} "
        "tensor(s): {', '.join(broken[:3])} .... A model with them computes nothing "
        "but NaN (a training run that diverged?). Load another checkpoint.":
        "{name} 的 {len(broken)} 个张量中有不是数的权重（NaN 或无穷大）：{', "
        "'.join(broken[:3])} ……带着它们的模型只会算出 NaN（训练发散了？）。请加载另一个"
        "检查点。",
    "{name} holds weights that are not numbers (NaN or infinite) in {len(broken)} "
        "tensor(s): {', '.join(broken[:3])}. A model with them computes nothing but "
        "NaN (a training run that diverged?). Load another checkpoint.":
        "{name} 的 {len(broken)} 个张量中有不是数的权重（NaN 或无穷大）：{', "
        "'.join(broken[:3])}。带着它们的模型只会算出 NaN（训练发散了？）。请加载另一个"
        "检查点。",
    "{name} could not be read. Copy or download it again.":
        "无法读取 {name}。请重新复制或下载。",
    "{name} is not a valid safetensors file ({_safetensors_problem(exc)}). Copy or "
        "download it again, or save it again with safetensors.torch.save_file.":
        "{name} 不是有效的 safetensors 文件（{_safetensors_problem(exc)}）。请重新复制"
        "或下载，或用 safetensors.torch.save_file 重新保存。",
    "The config {name} could not be read; upload it again.":
        "无法读取配置 {name}；请重新上传。",
    "The config {name} is not valid JSON.":
        "配置 {name} 不是有效的 JSON。",
    "{path.name} could not be read as a PyTorch checkpoint: it is cut short, or "
        "not a checkpoint. Copy it again, or save it with "
        "torch.save(model.state_dict(), 'model.pth').":
        "无法把 {path.name} 当作 PyTorch 检查点读取：它不完整，或者不是检查点。请重新复"
        "制，或用 torch.save(model.state_dict(), 'model.pth') 保存。",
    "{Path(path).name} could not be read to the end. Copy or download it again.":
        "{Path(path).name} 无法读到结尾。请重新复制或下载。",
    "Could not write the converted weights to {target.parent} ({exc.strerror or "
        "exc}). Free some disk space or set {STORE_ENV} to a folder with room.":
        "无法把转换后的权重写入 {target.parent}（{exc.strerror or exc}）。请腾出一些磁"
        "盘空间，或把 {STORE_ENV} 设为有空间的文件夹。",
}
