// Attention ops with reference kernels (in double):
//   attention{...}(Q, K, V[, attn_mask][, past_key, past_value][, nonpad_kv_seqlen])
//       -> (Y, present_key, present_value, qk_matmul_output)       ONNX Attention-23/24
//   rotary_embedding{interleaved, num_heads, rotary_embedding_dim}(X, cos, sin[, position_ids])
//   linear_attention{...}(query, key, value[, past_state][, decay][, beta]) -> (output, present_state)
// Attention stays one op (rather than a parse-time matmul/softmax decomposition): its
// mask, causal, KV-cache, GQA and softcap rules are easier to keep exact in one place,
// and a fused-attention lowering matches it directly. The optional inputs that are
// present are listed in order; has_* flags say which they are.
#pragma once
#include <kiln/operation.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace kiln::op {

struct attention {
    bool is_causal = false;
    std::int64_t q_num_heads = 0;   // required for 3-D inputs
    std::int64_t kv_num_heads = 0;
    std::optional<float> scale;     // default 1/sqrt(head_size)
    float softcap = 0.0f;           // 0: none
    std::int64_t qk_matmul_output_mode = 0;
    bool has_mask = false;
    bool has_past = false;
    bool has_nonpad = false;
    template <class Self, class F>
    static void reflect(Self& self, F f) {
        f(self.is_causal, "is_causal");
        f(self.q_num_heads, "q_num_heads");
        f(self.kv_num_heads, "kv_num_heads");
        f(self.scale, "scale");
        f(self.softcap, "softcap");
        f(self.qk_matmul_output_mode, "qk_matmul_output_mode");
        f(self.has_mask, "has_mask");
        f(self.has_past, "has_past");
        f(self.has_nonpad, "has_nonpad");
    }
    std::string name() const { return "attention"; }
    shape compute_shape(const std::vector<shape>& inputs) const;
    argument compute(const shape& out, const std::vector<argument>& args) const;
};

struct rotary_embedding {
    bool interleaved = false;
    std::int64_t num_heads = 0;
    std::int64_t rotary_embedding_dim = 0;  // 0: the whole head
    template <class Self, class F>
    static void reflect(Self& self, F f) {
        f(self.interleaved, "interleaved");
        f(self.num_heads, "num_heads");
        f(self.rotary_embedding_dim, "rotary_embedding_dim");
    }
    std::string name() const { return "rotary_embedding"; }
    shape compute_shape(const std::vector<shape>& inputs) const;
    argument compute(const shape& out, const std::vector<argument>& args) const;
};

struct linear_attention {
    std::int64_t q_num_heads = 0;
    std::int64_t kv_num_heads = 0;
    float scale = 0.0f;  // 0: 1/sqrt(d_k)
    std::string update_rule = "gated_delta";
    bool has_past = false;
    template <class Self, class F>
    static void reflect(Self& self, F f) {
        f(self.q_num_heads, "q_num_heads");
        f(self.kv_num_heads, "kv_num_heads");
        f(self.scale, "scale");
        f(self.update_rule, "update_rule");
        f(self.has_past, "has_past");
    }
    std::string name() const { return "linear_attention"; }
    bool gated() const { return update_rule == "gated" || update_rule == "gated_delta"; }
    bool delta() const { return update_rule == "delta" || update_rule == "gated_delta"; }
    shape compute_shape(const std::vector<shape>& inputs) const;
    argument compute(const shape& out, const std::vector<argument>& args) const;
};

// ai.onnx.preview FlexAttention: scores = Q K^T * scale, then the optional score_mod
// sub-module, softmax over the keys, the optional prob_mod sub-module, then probs V.
// Inputs: Q, K, V, then the values the score_mod body captures from enclosing graphs,
// then those of prob_mod. The sub-modules come as module arguments, score_mod first.
// *_params name each sub-module's parameters: its scores/probs input, then captures.
struct flex_attention {
    std::optional<float> scale;
    std::vector<std::string> score_params;  // empty: no score_mod
    std::vector<std::string> prob_params;   // empty: no prob_mod
    template <class Self, class F>
    static void reflect(Self& self, F f) {
        f(self.scale, "scale");
        f(self.score_params, "score_params");
        f(self.prob_params, "prob_params");
    }
    std::string name() const { return "flex_attention"; }
    shape compute_shape(const std::vector<shape>& inputs, const std::vector<module_ref>& mods) const;
    argument compute(const shape& out, const std::vector<argument>& args, const std::vector<module_ref>& mods,
                     const run_module_fn& run) const;
};

}  // namespace kiln::op
