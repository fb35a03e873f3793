"""简体中文 for the page: widgets' labels and choices (``label``), and the text the server makes
(``t``): status lines, notes, figures, tables and the app's own messages. Each key is the
English text as the code writes it, ``{fields}`` included.

Terms follow the Chinese edition 《从零构建大模型》, here and in the core's messages (zh.json):
token 词元, embedding 嵌入, LayerNorm 层归一化, attention 注意力, feed-forward 前馈网络, shortcut
connection 快捷连接, prompt 提示词, seed 随机种子, weights 权重, variant 变体, step 步, batch 批次,
context 上下文; config keys and code names stay as they are. Labels go to the browser,
which formats them with ICU MessageFormat: no braces and no apostrophes in their Chinese.
``SAME_IN_CHINESE``: texts the page shows as they are in both languages (config keys, code
names); ``tests/test_i18n.py`` checks that every other text has an entry here.
"""

SAME_IN_CHINESE = (
    # the Build tab's knobs that are the book's config keys, and names the app passes to t()
    "vocab_size", "context_length", "emb_dim", "n_heads", "n_layers", "drop_rate",
    "ff_expansion", "qkv_bias", "dtype", "x_min", "x_max", "lr", "top-k",
    # the lab's variants and activations that are names
    "post-LN", "ReLU", "SiLU", "RoPE",
    "Dropout",
)

ZH_UI: dict[str, str] = {
    # --- layout.py, shared.py ----------------------------------------------------------------
    "# GPT Explorer\nBuild the GPT of *Build a Large Language Model (From Scratch)*, chapter 4, "
    "and watch it work.":
        "# GPT Explorer\n搭建《从零构建大模型》第 4 章的 GPT，看看它是如何工作的。",
    "lecture mode": "授课模式",
    "language": "语言",
    ", ": "，",
    "No model yet — build one below.": "还没有模型 — 请在下方构建一个。",
    "Weights: none yet — build or load a model in tab 1.":
        "权重：暂无 — 请在标签页 1 中构建或加载模型。",
    "Weights: **{weights}** ({layers} layers, {heads} heads, emb_dim {emb_dim})":
        "权重：**{weights}**（{layers} 层，{heads} 个头，emb_dim {emb_dim}）",
    "**Model ready** — {variant}, **{weights}**, {n:,} parameters, on **{device}** ({dtype}).":
        "**模型就绪** — {variant}，**{weights}**，{n:,} 个参数，运行于 **{device}**（{dtype}）。",
    "**Model ready** — {what}, {n:,} parameters, on **{device}** ({dtype}), weights: "
    "**{weights}**, {how}.":
        "**模型就绪** — {what}，{n:,} 个参数，运行于 **{device}**（{dtype}），权重："
        "**{weights}**，{how}。",
    "from the shared cache in {ms:.0f} ms": "取自共享缓存，用时 {ms:.0f} 毫秒",
    "built in {s:.2f} s": "构建用时 {s:.2f} 秒",
    "loaded in {s:.2f} s": "加载用时 {s:.2f} 秒",
    " Note: assumed {what}.": "注意：假定了 {what}。",
    "custom config": "自定义配置",
    "config from the checkpoint": "检查点中的配置",
    "Something went wrong ({kind}); the model and your session are unchanged. Details are in "
    "the server log.":
        "出错了（{kind}）；模型和你的会话都没有改变。详情见服务器日志。",
    "Out of memory: choose a smaller model or a shorter prompt.":
        "内存不足：请选择更小的模型或更短的提示词。",
    "No model yet: build one in the Build tab first.": "还没有模型：请先在“构建”标签页中构建一个。",
    "Trace a prompt first (Inside the forward pass → Trace).":
        "请先追踪一个提示词（前向传播内部 → 追踪）。",
    # what a value was, for "(got ...)"
    "a list": "列表",
    "a JSON object": "JSON 对象",
    "text": "文本",
    "true/false": "布尔值",
    "nothing": "空值",
    "a {type}": "{type} 类型的值",
    "{name} is empty: enter a whole number.": "“{name}”为空：请输入一个整数。",
    "{name} must be a whole number (got {value}).": "“{name}”必须是整数（收到 {value}）。",
    "{name} must be a number (got {value}).": "“{name}”必须是数字（收到 {value}）。",
    "{name} must be a finite number (got {value}).": "“{name}”必须是有限的数（收到 {value}）。",
    "{name} must be one of {options} (got {value}).":
        "“{name}”必须是 {options} 之一（收到 {value}）。",
    "{name} must be a list of some of {options} (got {value}).":
        "“{name}”必须是由 {options} 中若干项组成的列表（收到 {value}）。",
    "{name} must be true or false (got {value}).": "“{name}”必须是 true 或 false（收到 {value}）。",
    "The prompt must be text.": "提示词必须是文本。",
    "The prompt has {n:,} characters; the explorer takes at most {most:,}. Shorten it.":
        "提示词有 {n:,} 个字符；本工具最多接受 {most:,} 个。请缩短它。",
    "The prompt is empty: type some text first.": "提示词为空：请先输入一些文字。",
    "The GPT-2 tokenizer gives this prompt token ids up to {top:,}, but this model's vocab_size "
    "is {vocab:,} (ids 0 to {last:,}). Rebuild with vocab_size {n_vocab:,}, the tokenizer's.":
        "GPT-2 分词器给这个提示词的词元 ID 最大为 {top:,}，但此模型的 vocab_size 是 {vocab:,}"
        "（ID 为 0 到 {last:,}）。请用分词器的 vocab_size {n_vocab:,} 重新构建。",
    "Layer {layer} does not exist: this model has layers 0 to {last}.":
        "第 {layer} 层不存在：此模型的层为 0 到 {last}。",
    "Tracing {n:,} tokens needs about {need:,.0f} MB (the attention weights grow with the "
    "square of the length: {heads} heads × {n:,}²), but one trace may use {allowed:,.0f} MB of "
    "memory. Use a prompt of at most {most:,} tokens.":
        "追踪 {n:,} 个词元大约需要 {need:,.0f} MB（注意力权重随长度的平方增长：{heads} 个头 × "
        "{n:,}²），但一次追踪最多只能用 {allowed:,.0f} MB 内存。请使用最多 {most:,} 个词元的提示词。",
    # names of the inputs, in "... must be ..." messages
    "layer": "层",
    "layer (real inputs)": "层（真实输入）",
    "head": "头",
    "preset": "预设",
    "device": "设备",
    "size": "规模",
    "seed": "随机种子",
    "distribution": "分布",
    "heatmap: probe point": "热力图：探测点",
    "heatmap: statistic": "热力图：统计量",
    "export format": "导出格式",
    "functions": "函数",
    "show derivatives": "显示导数",
    "max new tokens": "最大新词元数",
    "decoding": "解码方式",
    "temperature": "温度",
    "stop at <|endoftext|>": "遇到 <|endoftext|> 时停止",
    "data": "数据",
    "steps": "步数",
    "batch size": "批次大小",
    "context": "上下文",
    "warm-up steps": "预热步数",
    "variants": "变体",
    "model": "模型",
    "trained variant": "已训练的变体",
    # --- the app's own checks of what its plots are given ------------------------------------
    "lang must be one of {', '.join(LANGS)} (got {got}).":
        "lang 必须是 {', '.join(LANGS)} 之一（收到 {got}）。",
    "lecture must be true or false (got {type(lecture).__name__}).":
        "lecture 必须是 true 或 false（收到 {type(lecture).__name__}）。",
    "{UPLOAD_ENV} must be a positive number of MB (got {value!r}).":
        "{UPLOAD_ENV} 必须是正的 MB 数（收到 {value!r}）。",
    "{UPLOAD_ENV} must be a number of MB (got {value!r}).":
        "{UPLOAD_ENV} 必须是 MB 数（收到 {value!r}）。",
    "labels must name the two gradient results, e.g. ('with shortcut', 'without shortcut').":
        "labels 必须为两个梯度结果命名，例如 (“with shortcut”, “without shortcut”)。",
    "Activation {name!r} is not in these curves; they have {', '.join(functions)}.":
        "激活函数 {name!r} 不在这些曲线中；现有的是 {', '.join(functions)}。",
    "ff_inputs must be (counts, edges) of one layer, with one more edge than counts.":
        "ff_inputs 必须是某一层的 (counts, edges)，edges 比 counts 多一个。",
    "A figure shows one or two models; got {len(items)} {what}.":
        "一张图显示一个或两个模型；收到 {len(items)} 个 {what}。",
    "{len(items)} {what} but {len(names)} names.":
        "{len(items)} 个 {what}，但有 {len(names)} 个名字。",
    "Bars of one or two models; got {len(sides)}.": "一个或两个模型的条形图；收到 {len(sides)} 个。",
    "texts and probs must have the same length ({len(texts)} vs {len(probs)}).":
        "texts 和 probs 的长度必须相同（{len(texts)} 对 {len(probs)}）。",
    "chosen must be the index of one of the {len(texts)} candidates (got {chosen!r}).":
        "chosen 必须是 {len(texts)} 个候选之一的下标（收到 {chosen!r}）。",
    "Unknown probe point {point!r}; choose from {', '.join(POINT_LABELS)}.":
        "未知的探测点 {point!r}；请从 {', '.join(POINT_LABELS)} 中选择。",
    "Layer {layer!r} does not exist: this model has layers 0 to {n - 1}.":
        "第 {layer!r} 层不存在：此模型的层为 0 到 {n - 1}。",
    "Unknown statistic {stat!r}; choose from {', '.join(STAT_NAMES)}.":
        "未知的统计量 {stat!r}；请从 {', '.join(STAT_NAMES)} 中选择。",
    "Knob {self.field}: unknown kind {self.kind!r}.": "设置项 {self.field}：未知的类型 {self.kind!r}。",
    # --- plots/labels.py ---------------------------------------------------------------------
    "{n} layers from {first} to {last}": "第 {first} 到 {last} 层（共 {n} 层）",
    "layer {layers}": "第 {layers} 层",
    "layers {layers}": "第 {layers} 层",
    # probe points (explorer.book.probe_points.POINT_LABELS)
    "residual stream entering the block": "进入块的残差流",
    "norm1 input (before LayerNorm)": "norm1 输入（层归一化之前）",
    "norm1 output (after LayerNorm, scale and shift)": "norm1 输出（层归一化、缩放和平移之后）",
    "attention output": "注意力输出",
    "residual stream after attention": "注意力之后的残差流",
    "norm2 input (before LayerNorm)": "norm2 输入（层归一化之前）",
    "norm2 output (after LayerNorm, scale and shift)": "norm2 输出（层归一化、缩放和平移之后）",
    "feed-forward hidden, before activation": "前馈网络隐藏层，激活之前",
    "feed-forward hidden, after activation": "前馈网络隐藏层，激活之后",
    "feed-forward output": "前馈网络输出",
    "block output": "块输出",
    "final_norm input": "final_norm 输入",
    "final_norm output": "final_norm 输出",
    "attention queries": "注意力查询",
    "attention keys": "注意力键",
    "attention weights": "注意力权重",
    # --- plots/model.py, tabs/build.py: the model and its parameters -------------------------
    "Parameters: {n} in total ({total:,})": "参数：共 {n}（{total:,}）",
    "{n} params": "{n} 参数",
    "%{y}: %{x:,} parameters": "%{y}：%{x:,} 个参数",
    "{n} without the output head (the book's count with weight tying)":
        "不含输出头为 {n}（本书考虑权重共享时的计数）",
    "the output head shares the token embedding (tied weights)":
        "输出头与词元嵌入共用同一组权重（权重共享）",
    "parameters": "参数",
    "component": "组件",
    "share": "占比",
    "total": "总计",
    "token embedding": "词元嵌入",
    "position embedding": "位置嵌入",
    "attention": "注意力",
    "feed-forward": "前馈网络",
    "layer norms": "层归一化",
    "output head": "输出头",
    "0 (tied: counted in the token embedding)": "0（权重共享：已计入词元嵌入）",
    "input: token ids, shape (batch, T), T ≤ {n:,}": "输入：词元 ID，形状 (batch, T)，T ≤ {n:,}",
    "Token embedding": "词元嵌入",
    "{v:,} ids → {d}": "{v:,} 个 ID → {d}",
    "Positional embedding": "位置嵌入",
    "{n:,} positions → {d}": "{n:,} 个位置 → {d}",
    "(no positional embedding: RoPE rotates queries and keys inside attention)":
        "（没有位置嵌入：RoPE 在注意力内部旋转查询和键）",
    "{d} features, scale and shift": "{d} 个特征，缩放和平移",
    "Masked multi-head attention": "掩码多头注意力",
    "{d} → {heads} heads × {head_dim} → {d}": "{d} → {heads} 个头 × {head_dim} → {d}",
    "Feed-forward": "前馈网络",
    "GELU (tanh approx., book)": "GELU（tanh 近似，本书）",
    "GELU (exact)": "GELU（精确）",
    "⊕ Add the shortcut": "⊕ 加上快捷连接",
    "shortcut = x (input of this part)": "shortcut = x（这一部分的输入）",
    "pre-LayerNorm (the book, GPT-2)": "前置层归一化（本书、GPT-2）",
    "post-LayerNorm (the original Transformer)": "后置层归一化（原始 Transformer）",
    "no normalisation": "无归一化",
    "with shortcut connections": "有快捷连接",
    "no shortcut connections": "无快捷连接",
    "{each} params each, {all} in all": "每块 {each} 参数，共 {all}",
    "No final norm": "无最终归一化",
    "Identity (norm_placement none)": "恒等映射（norm_placement 为 none）",
    "Final LayerNorm": "最终层归一化",
    "{d} features": "{d} 个特征",
    "Output head": "输出头",
    ", tied to tok_emb (shares its weights)": "，与 tok_emb 绑定（共享权重）",
    "logits, shape (batch, T, {v:,})": "logits，形状 (batch, T, {v:,})",
    "<b>Total:</b> {n} parameters ({total:,})": "<b>总计：</b>{n} 个参数（{total:,}）",
    # --- tabs/build.py -----------------------------------------------------------------------
    "1 · Build": "1 · 构建",
    "weights": "权重",
    "random (seed)": "随机初始化（随机种子）",
    "pretrained GPT-2 (OpenAI)": "预训练 GPT-2（OpenAI）",
    "from a file": "来自文件",
    "random: a config (preset, knobs) and a seed; pretrained and file: the checkpoint's own "
    "config":
        "随机：一个配置（预设和各项设置）加一个随机种子；预训练和文件：使用检查点自带的配置",
    "GPT-2 size (downloaded once from the Hugging Face hub)":
        "GPT-2 规模（从 Hugging Face hub 下载一次）",
    "path on the server": "服务器上的路径",
    "/path/to/model.safetensors (or the book's model.pth)":
        "/path/to/model.safetensors（或本书的 model.pth）",
    "or upload model.safetensors / .pth (and its config.json)":
        "或上传 model.safetensors / .pth（以及它的 config.json）",
    "Preset": "预设",
    "LayerNorm placement": "层归一化（LayerNorm）位置",
    "activation": "激活函数",
    "position encoding": "位置编码",
    "shortcut connections": "快捷连接",
    "tie out_head to tok_emb": "out_head 与 tok_emb 共享权重",
    "a value": "一个值",
    "a number in [0, 1)": "一个 [0, 1) 区间内的数",
    "dtype (bfloat16: GPU only)": "dtype（bfloat16：仅限 GPU）",
    "Build the model": "构建模型",
    "Load GPT-2 (downloaded once)": "加载 GPT-2（只下载一次）",
    "Load the checkpoint": "加载检查点",
    "Export this model (model.safetensors + config.json)":
        "导出此模型（model.safetensors + config.json）",
    "Hugging Face's GPT-2 layout": "Hugging Face 的 GPT-2 布局",
    "the book's names": "本书的命名",
    "Export": "导出",
    "model files": "模型文件",
    "Parameters": "参数",
    "Parameters per component": "各组件的参数",
    "{field} is empty: enter {what}.": "“{field}”为空：请输入{what}。",
    "The upload could not be read; upload the file again.": "无法读取上传的文件；请重新上传。",
    "Upload one weights file ({suffixes}), and if you have it its config.json (got {names}).":
        "请上传一个权重文件（{suffixes}），如果有的话再加上它的 config.json（收到 {names}）。",
    "From a file: give the path of a model.safetensors (or the book's model.pth) on the server, "
    "or upload the file.":
        "来自文件：请给出服务器上 model.safetensors（或本书的 model.pth）的路径，或上传该文件。",
    "The weights path must be text (got {kind}).": "权重路径必须是文本（收到 {kind}）。",
    "Loading a path on the server is switched off here; upload the file instead.":
        "这里已关闭从服务器路径加载；请改为上传文件。",
    "Preview of <b>{name}</b>: not built yet. Press <b>Build the model</b>.":
        "<b>{name}</b> 的预览：尚未构建。请点击<b>构建模型</b>。",
    "Checking the config": "正在检查配置",
    "Initialising the weights (torch.manual_seed, then GPTModel(cfg))":
        "正在初始化权重（先 torch.manual_seed，再 GPTModel(cfg)）",
    "Checking {name} (shapes, sha256)": "正在检查 {name}（形状、sha256）",
    "Done": "完成",
    "Weight tying — {notes}. Total **{n:,}**.": "权重共享 — {notes}。总计 **{n:,}**。",
    "Total **{n:,}**; without the output head **{without:,}** — the book's two figures (section "
    "4.6). GPT-2 reuses the token embedding as its output head (weight tying), which is why the "
    "book's 163 M-parameter `GPT_CONFIG_124M` is called 124M. Tick *tie out_head to tok_emb* to "
    "build it that way.":
        "总计 **{n:,}**；不含输出头为 **{without:,}** — 即本书的两个数字（4.6 节）。GPT-2 把词元"
        "嵌入复用为输出头（权重共享），所以本书中参数量为 163M 的 `GPT_CONFIG_124M` 被称为 124M。"
        "勾选 *out_head 与 tok_emb 共享权重* 即可这样构建。",
    "Memory for the weights: **{fp32:,.2f} MB** at float32, **{bf16:,.2f} MB** at bfloat16 "
    "(bytes / 1024²). Runs on **{device}**. Weights: {weights}. Shared cache: {models} "
    "model(s), {used:,.0f} of {budget:,.0f} MB.":
        "权重占用内存：float32 下 **{fp32:,.2f} MB**，bfloat16 下 **{bf16:,.2f} MB**"
        "（字节数 / 1024²）。运行于 **{device}**。权重：{weights}。共享缓存：{models} 个模型，"
        "已用 {used:,.0f} / {budget:,.0f} MB。",
    "hf_layout must be true or false (got {value!r}).":
        "hf_layout 必须是 true 或 false（收到 {value!r}）。",
    "Exported **{weights}** in {layout}: `model.safetensors` ({mb:,.1f} MB) and `config.json`. "
    "Load them again with *weights: from a file*.":
        "已按{layout}导出 **{weights}**：`model.safetensors`（{mb:,.1f} MB）和 `config.json`。"
        "用 *权重：来自文件* 可以再次加载。",
    # --- tabs/inside.py, plots/statistics.py -------------------------------------------------
    "2 · Inside the forward pass": "2 · 前向传播内部",
    "Prompt": "提示词",
    "Trace": "追踪",
    "Before and after LayerNorm, layer by layer": "逐层查看层归一化前后",
    "Distribution": "分布",
    "Per token and layer": "按词元和层",
    "Export statistics": "导出统计量",
    "Download": "下载",
    "Download {name} ({size})": "下载 {name}（{size}）",
    "{n} bytes": "{n} 字节",
    "one text, {n} tokens": "一段文字，{n} 个词元",
    "… and {n} more tokens": "…… 还有 {n} 个词元",
    "{n} tokens · traced in {ms:.0f} ms · weights: {weights}":
        "{n} 个词元 · 追踪用时 {ms:.0f} 毫秒 · 权重：{weights}",
    "Press Trace (above) to see this for your prompt.": "点击上方的“追踪”，即可看到你的提示词的结果。",
    "Statistics across layers": "各层的统计量",
    "Distribution in one layer": "某一层的分布",
    "One statistic per token and layer": "每个词元、每一层的一个统计量",
    "norm1: before vs after LayerNorm": "norm1：层归一化之前 vs 之后",
    "norm2: before vs after LayerNorm": "norm2：层归一化之前 vs 之后",
    "final_norm: before vs after": "final_norm：之前 vs 之后",
    "feed-forward hidden: before vs after activation": "前馈网络隐藏层：激活之前 vs 之后",
    "residual stream: entering vs leaving the block": "残差流：进入块 vs 离开块",
    "This model has no LayerNorm (norm_placement='none'): choose the feed-forward or "
    "residual-stream comparison.":
        "此模型没有层归一化（norm_placement 为 none）：请选择前馈网络或残差流的对比。",
    "Probe point {point!r} is not in this trace; choose one of {points}.":
        "探测点 {point!r} 不在此追踪中；请从 {points} 中选择一个。",
    "Mean": "均值",
    "Standard deviation": "标准差",
    "Root mean square": "均方根",
    "Minimum": "最小值",
    "Maximum": "最大值",
    "Mean absolute value": "平均绝对值",
    "Fraction of exact zeros": "恰好为零的比例",
    "Count of inf/NaN values": "inf/NaN 值的个数",
    "not in this model: {points} (no normalisation layers)": "此模型中没有：{points}（无归一化层）",
    "not recorded: {points}": "未记录：{points}",
    "{point}: inf/NaN in {layers}": "{point}：{layers}有 inf/NaN",
    "None of these probe points was recorded for this model.": "此模型没有记录这些探测点中的任何一个。",
    "layer %{x}: min %{y:.3g}, max %{customdata:.3g}":
        "第 %{x} 层：最小值 %{y:.3g}，最大值 %{customdata:.3g}",
    "layer %{x}: mean %{y:.4g}": "第 %{x} 层：均值 %{y:.4g}",
    "layer %{x}: std %{y:.4g}": "第 %{x} 层：标准差 %{y:.4g}",
    "solid line: mean · dashed line: standard deviation · light band: min to max":
        "实线：均值 · 虚线：标准差 · 浅色带：最小值到最大值",
    "(inf/NaN values are shown as gaps)": "（inf/NaN 值显示为空缺）",
    "layer (transformer block)": "层（Transformer 块）",
    "value": "值",
    "{point}: no finite values": "{point}：没有有限值",
    "value %{x:.3g}: density %{y:.3g}": "值 %{x:.3g}：密度 %{y:.3g}",
    "{point}: {n} inf/NaN values left out": "{point}：略去了 {n} 个 inf/NaN 值",
    "Distribution of values at the final norm": "最终归一化处的数值分布",
    "Distribution of values in layer {layer}": "第 {layer} 层的数值分布",
    "Nothing to show for these probe points.": "这些探测点没有可显示的内容。",
    "activation value": "激活值",
    "density": "密度",
    "{stat} per token": "每个词元的{stat}",
    "measured at: {label} ({point})": "测量位置：{label}（{point}）",
    "the last {shown} of {n} tokens": "{n} 个词元中的最后 {shown} 个",
    "inf/NaN values shown as gaps (grey)": "inf/NaN 值显示为空缺（灰色）",
    "layer %{y}, token %{x}": "第 %{y} 层，词元 %{x}",
    "token": "词元",
    "layer (final norm)": "层（最终归一化）",
    # --- tabs/gradients.py, plots/curves.py --------------------------------------------------
    "Why shortcut connections? (book 4.4)": "为什么需要快捷连接？（本书 4.4 节）",
    "Run one backward pass": "运行一次反向传播",
    "The book's 5-layer network": "本书的 5 层网络",
    "Your GPT config, per block": "你的 GPT 配置，逐块比较",
    "Build a model (tab 1) to compare its blocks too.": "构建一个模型（标签页 1），就能比较它的各个块。",
    "This model is too large for this comparison:<br>it builds two trainable copies (at most "
    "200 MB).<br>Build a teaching preset to see it.":
        "这个模型太大，无法做此比较：<br>它要构建两个可训练的副本（最多 200 MB）。<br>"
        "请构建一个教学预设来查看。",
    "with shortcut": "有快捷连接",
    "without shortcut": "无快捷连接",
    "layer {n}": "第 {n} 层",
    "{name}: zero or missing gradients are not drawn (log scale)":
        "{name}：为零或缺失的梯度不画出（对数刻度）",
    "Mean |gradient| per layer (book, section 4.4)": "每层的平均 |梯度|（本书 4.4 节）",
    "first layer at the top: gradients flow back from the loss at the bottom":
        "第一层在上面：梯度从下面的损失往回流",
    "layer (weight)": "层（权重）",
    "mean |gradient| (log scale)": "平均 |梯度|（对数刻度）",
    "embedding": "嵌入",
    "block {n}": "块 {n}",
    "{name}: zero or inf/NaN gradients not drawn": "{name}：为零或 inf/NaN 的梯度未画出",
    "{name} (loss {loss:.2f})": "{name}（损失 {loss:.2f}）",
    "Mean |gradient| from input to output": "从输入到输出的平均 |梯度|",
    "where in the model (input → output)": "在模型中的位置（输入 → 输出）",
    # --- tabs/attention.py, plots/attention.py -----------------------------------------------
    "3 · Attention": "3 · 注意力",
    "Trace a prompt in tab 2 first. Rows are queries (the token that looks), columns are keys "
    "(the token looked at); the grey upper triangle is masked: a token never sees the future.":
        "请先在标签页 2 中追踪一个提示词。行是查询（发出关注的词元），列是键（被关注的词元）；"
        "灰色的上三角被掩码：词元永远看不到未来。",
    "mean": "平均",
    "Show attention": "显示注意力",
    "Attention weights": "注意力权重",
    "Every head of this layer": "这一层的每个头",
    "Entropy per head": "每个头的熵",
    "Export this attention matrix (CSV)": "导出此注意力矩阵（CSV）",
    "Trace a prompt in tab 2, then press Show attention.":
        "先在标签页 2 中追踪一个提示词，然后点击“显示注意力”。",
    "Show this layer's attention first, then export it.": "请先显示这一层的注意力，再导出。",
    "query\\key": "查询\\键",
    "attention patterns were kept for {layers}": "只保留了{layers}的注意力模式",
    "no attention patterns were kept for this input": "此输入没有保留任何注意力模式",
    "Layer {layer!r} has no attention pattern in this trace: {have}. Trace again with "
    "attention_layers=[{layer}].":
        "第 {layer!r} 层在此追踪中没有注意力模式：{have}。请用 attention_layers=[{layer}] "
        "重新追踪。",
    "mean over {n} heads": "{n} 个头的平均",
    "Head {head!r} does not exist: layer {layer} has heads 0 to {last} (or 'mean').":
        "头 {head!r} 不存在：第 {layer} 层的头为 0 到 {last}（或 'mean'）。",
    "head {head}": "头 {head}",
    "each row: how much one query token attends to each earlier token":
        "每一行：一个查询词元对它之前每个词元的关注程度",
    "the last {shown} of {n} tokens; keys before token {start} are hidden, so rows sum to less "
    "than 1":
        "{n} 个词元中的最后 {shown} 个；词元 {start} 之前的键被隐藏，所以每行之和小于 1",
    "weight": "权重",
    "query %{y}<br>key %{x}<br>weight %{z:.3f}": "查询 %{y}<br>键 %{x}<br>权重 %{z:.3f}",
    "Attention in layer {layer}, {head}": "第 {layer} 层的注意力，{head}",
    "key (the token looked at)": "键（被关注的词元）",
    "query (the token looking)": "查询（发出关注的词元）",
    "mean weight": "平均权重",
    "queries from %{y}, keys from %{x}<br>mean weight %{z:.4f}":
        "查询自 %{y}，键自 %{x}<br>平均权重 %{z:.4f}",
    "query %{y}, key %{x}<br>weight %{z:.3f}": "查询 %{y}，键 %{x}<br>权重 %{z:.3f}",
    "queries top to bottom, keys left to right; grey = future tokens (masked)":
        "查询从上到下，键从左到右；灰色 = 未来的词元（已掩码）",
    "the first {n} of {all} heads (see one head at a time for the others)":
        "{all} 个头中的前 {n} 个（其余的头请逐个查看）",
    "{n} tokens shown as {side} × {side} cells per head (neighbouring tokens averaged, "
    "~{size:.0f} per cell)":
        "每个头把 {n} 个词元显示为 {side} × {side} 个格子（相邻词元取平均，每格约 {size:.0f} 个）",
    "all {n} heads": "全部 {n} 个头",
    "heads 0–{last} of {all}": "{all} 个头中的头 0–{last}",
    "Attention in layer {layer}: {shown}": "第 {layer} 层的注意力：{shown}",
    "Attention entropy per head (bits)": "每个头的注意力熵（比特）",
    "No attention entropy recorded.": "没有记录注意力熵。",
    "0 = looks at one token; {most:.2f} = spread evenly over all earlier tokens (mean over {n} "
    "queries)":
        "0 = 只关注一个词元；{most:.2f} = 均匀分散到之前所有词元（{n} 个查询的平均）",
    "bits": "比特",
    "layer %{y}, head %{x}<br>mean entropy %{z:.3f} bits":
        "第 %{y} 层，头 %{x}<br>平均熵 %{z:.3f} 比特",
    # --- tabs/activations.py, plots/curves.py ------------------------------------------------
    "4 · Activation functions": "4 · 激活函数",
    "x from": "x 起点",
    "x to": "x 终点",
    "Tick at least one activation function.": "请至少勾选一个激活函数。",
    "Activation functions": "激活函数",
    "Activation functions and their derivatives": "激活函数及其导数",
    "real feed-forward inputs": "前馈网络的真实输入",
    "input %{x:.3g}: %{y:.1%} of values": "输入 %{x:.3g}：占全部值的 %{y:.1%}",
    "{share:.0%} of the real inputs lie outside the x range shown":
        "{share:.0%} 的真实输入落在所示 x 范围之外",
    "share of real inputs (bars)": "真实输入的占比（柱）",
    "output": "输出",
    "the real feed-forward inputs are all inf/NaN: no histogram":
        "前馈网络的真实输入全是 inf/NaN：无法画直方图",
    "derivative of {name}": "{name} 的导数",
    "x %{x:.2f}: slope %{y:.3f}": "x %{x:.2f}：斜率 %{y:.3f}",
    "input x": "输入 x",
    # --- tabs/generate.py, plots/generation.py, plots/lens.py --------------------------------
    "5 · Generate": "5 · 生成",
    "top-k (0: all)": "top-k（0：全部）",
    "sampling seed": "采样随机种子",
    "greedy": "贪心",
    "sample": "采样",
    "Generate": "生成",
    "Next token": "下一个词元",
    "Stop": "停止",
    "Text": "文本",
    "Next-token probabilities (top 10)": "下一个词元的概率（前 10 个）",
    "Steps": "步骤",
    "Logit lens: what each layer would predict": "logit 透镜：每一层会预测什么",
    "Read the logit lens for the prompt": "读取提示词的 logit 透镜",
    "Logit lens": "logit 透镜",
    "max new tokens must be between 1 and {most} in the explorer (got {n}).":
        "在本工具中，最大新词元数必须在 1 到 {most} 之间（收到 {n}）。",
    "a number above 0": "大于 0 的数",
    "a whole number": "整数",
    "{name} must be {wanted} (got {value}).": "“{name}”必须是{wanted}（收到 {value}）。",
    "temperature must be a finite number above 0 (got {value}).":
        "温度必须是大于 0 的有限数（收到 {value}）。",
    "Sampling needs a temperature above 0 (0 would be greedy decoding).":
        "采样需要大于 0 的温度（温度为 0 就是贪心解码）。",
    "step": "步",
    "probability": "概率",
    "rank": "排名",
    "entropy (bits)": "熵（比特）",
    "ms": "毫秒",
    "{n} earlier steps": "更早的 {n} 步",
    "Steps (newest first)": "步骤（最新的在前）",
    " · window full: recomputing the last context_length tokens":
        " · 窗口已满：重新计算最后 context_length 个词元",
    "{n} tokens · <b>{rate:.1f} tokens/s</b> · {path}":
        "{n} 个词元 · <b>{rate:.1f} 词元/秒</b> · {path}",
    "A generation is still streaming: wait for it to finish (or press Stop), then press Next "
    "token.":
        "生成仍在进行中：请等它结束（或点击“停止”），再点击“下一个词元”。",
    "Next-token candidates": "下一个词元的候选",
    "Press <b>Generate</b> or <b>Next token</b>: the model's top 10 candidates for the next "
    "token appear here, as bars on a 0–100 % scale.":
        "点击<b>生成</b>或<b>下一个词元</b>：模型对下一个词元的前 10 个候选会以柱形显示在这里，"
        "刻度为 0–100 %。",
    "◀ chosen": "◀ 选中",
    "(bar = probability; a full bar is 100 %)": "（柱长 = 概率；满格为 100 %）",
    "Logit lens: each layer's guess for the next token": "logit 透镜：每一层对下一个词元的猜测",
    "The logit lens was not read for this input.": "此输入没有读取 logit 透镜。",
    "the last {shown} of {n} positions": "{n} 个位置中的最后 {shown} 个",
    "inf/NaN probabilities shown as gaps (grey)": "inf/NaN 概率显示为空缺（灰色）",
    "too many positions to print the guesses in the cells: hover over a cell to read it":
        "位置太多，格子里写不下猜测：把鼠标悬停在格子上即可查看",
    "layer %{y}, after input %{x}<br>top-1 guess: %{customdata[0]} (p = %{z:.3f})<br>p of the "
    "final prediction %{customdata[2]}: %{customdata[1]:.3f}":
        "第 %{y} 层，输入 %{x} 之后<br>top-1 猜测：%{customdata[0]}（p = %{z:.3f}）<br>"
        "最终预测 %{customdata[2]} 的 p：%{customdata[1]:.3f}",
    "input token (the guess is for the token after it)": "输入词元（猜测的是它后面的词元）",
    # --- tabs/train.py, plots/training.py ----------------------------------------------------
    "6 · Train": "6 · 训练",
    "Variants (two to 4)": "变体（2 到 4 个）",
    "pre-LN (book)": "pre-LN（本书）",
    "no shortcut": "无快捷连接",
    "no LayerNorm": "无层归一化",
    "GELU exact": "GELU（精确）",
    "expansion 2": "扩展倍数 2",
    "expansion 8": "扩展倍数 8",
    "tied weights": "权重共享",
    "the default story": "默认故事",
    "pasted text": "粘贴的文本",
    "an uploaded .txt": "上传的 .txt",
    "The Clockmaker's Daughter": "《钟表匠的女儿》",
    "warm-up": "预热",
    "Train": "训练",
    "Continue": "继续",
    "Your own text (paste it, or upload a .txt) — then choose it under data":
        "你自己的文本（粘贴，或上传 .txt）— 然后在“数据”中选中它",
    "pasted text (up to 1 MB)": "粘贴的文本（最多 1 MB）",
    "a .txt file": "一个 .txt 文件",
    "Loss": "损失",
    "Gradient norm per block": "每个块的梯度范数",
    "Variants": "变体",
    "Use this model (tabs 2–5)": "使用此模型（标签页 2–5）",
    "Export it (model.safetensors + config.json)": "导出它（model.safetensors + config.json）",
    "exported files": "导出的文件",
    "This request has no session; open the page (or a gradio_client Client) to train.":
        "此请求没有会话；请打开页面（或一个 gradio_client Client）来训练。",
    "The pasted text must be text.": "粘贴的内容必须是文本。",
    "No file uploaded: upload a .txt file, or choose the default story or pasted text.":
        "没有上传文件：请上传一个 .txt 文件，或选择默认故事或粘贴的文本。",
    "The uploaded file could not be found; upload it again.": "找不到上传的文件；请重新上传。",
    "lr is empty: enter a number; the book uses {lr}.": "lr 为空：请输入一个数；本书用的是 {lr}。",
    "Choose two to {most} variants to compare (got {n}).":
        "请选择 2 到 {most} 个变体进行比较（收到 {n} 个）。",
    "This session has no training job: press Train first.": "此会话没有训练任务：请先点击“训练”。",
    "Nothing trained yet: wait for the first steps, then use the model.":
        "还没有训练任何内容：请等最初几步完成后再使用模型。",
    "trained {steps} step on {corpus} ({variant})": "训练了 {steps} 步，语料：{corpus}（{variant}）",
    "trained {steps} steps on {corpus} ({variant})": "训练了 {steps} 步，语料：{corpus}（{variant}）",
    "variant": "变体",
    "tokens seen": "已见词元",
    "train loss": "训练损失",
    "val loss": "验证损失",
    "s / step": "秒/步",
    "diverged": "发散",
    "yes, at step {step}": "是，在第 {step} 步",
    "no": "否",
    "Ready": "就绪",
    "Training": "训练中",
    "Stopped": "已停止",
    "Finished": "已完成",
    "Cancelled": "已取消",
    "Failed": "失败",
    "The curves grow here while the variants train.": "变体训练时，曲线会在这里逐渐延伸。",
    "train": "训练",
    "val": "验证",
    "loss": "损失",
    "solid: training loss · dashed: validation loss (the book's evaluate_model)":
        "实线：训练损失 · 虚线：验证损失（本书的 evaluate_model）",
    "{variant} diverged at step {step}": "{variant} 在第 {step} 步发散",
    "cross-entropy loss": "交叉熵损失",
    "Each variant's gradient norms per block appear here.": "每个变体各个块的梯度范数会显示在这里。",
    "block": "块",
    "block 0 is next to the input; dark: gradients that barely reach the block":
        "块 0 紧挨着输入；深色：几乎传不到该块的梯度",
    "block (input → output)": "块（输入 → 输出）",
    "**Latest samples** (greedy, from the start context):":
        "**最新样本**（贪心解码，从起始上下文开始）：",
    " (step {step})": "（第 {step} 步）",
    "No training yet: choose the data and two to four variants, then press **Train**.":
        "还没有训练：选择数据和 2 到 4 个变体，然后点击 **训练**。",
    "**{status}** — step {step:,} of {total:,} ({share:.0%}), {seen} of {tokens} tokens per "
    "variant, on *{corpus}*, {seconds:.0f} s.":
        "**{status}** — 第 {step:,} / {total:,} 步（{share:.0%}），每个变体已见 {seen} / {tokens} "
        "个词元，语料：*{corpus}*，{seconds:.0f} 秒。",
    # --- the hostile-requests issue ----------------------------------------------------
    "The GPT-2 tokenizer gives this prompt token ids up to {top:,}, but model "
        "{name}'s vocab_size is {vocab:,} (ids 0 to {last:,}). Rebuild it with "
        "vocab_size {n_vocab:,}, the tokenizer's.":
        "GPT-2 分词器给这段提示词的词元 ID 最大到 {top:,}，但模型 {name} 的 vocab_size "
        "是 {vocab:,}（ID 0 到 {last:,}）。请用分词器的 vocab_size {n_vocab:,} 重新构建"
        "它。",
    "No checkpoint could be loaded from that path on the server: there is no file "
        "there that the explorer can read as a model.safetensors or the book's "
        "model.pth. Check the path, or upload the file (an upload says what is wrong "
        "with it).":
        "无法从服务器上的这个路径加载检查点：那里没有本工具能当作 model.safetensors 或"
        "本书的 model.pth 读取的文件。请检查路径，或上传文件（上传时会说明文件哪里有问"
        "题）。",
}
