#!/usr/bin/python3
"""Exports torchaudio's speech and audio architectures with dynamic batch and length, the way users
do, and checks Kiln against PyTorch's own outputs at two sizes each with `kiln verify --expected`
(atol 1e-4, rtol 1e-3). The audio companion of sequence_sweep.py; run by hand (needs Debian's
python3-torch and python3-torchaudio; a few minutes), `make test` does not run it.

    /usr/bin/python3 bench/audio_sweep.py OUT_DIR                 # every model below
    /usr/bin/python3 bench/audio_sweep.py OUT_DIR conformer

Models (torchaudio's own classes, random weights from a fixed seed; depth cut where noted so that a
run takes minutes, widths as published):
  wav2vec2      wav2vec2/HuBERT base: 7 strided Conv1d with GroupNorm, grouped positional conv
                (kernel 128, 16 groups), 2 of the 12 post-norm encoder layers, over raw audio [batch, samples]
  wav2vec2_ln   the large-model variant: LayerNorm feature extractor, pre-norm layers (2, width 768)
  conformer     Conformer (4 heads, 2 layers, depthwise kernel 31) over [batch, time, 80] with lengths
                (its padding mask sized by the time dim: torchaudio's own is traced as a constant)
  wav2letter    Wav2Letter over MFCC [batch, 13, time] and over raw audio [batch, 1, samples]
  convtasnet    Conv-TasNet source separation (dilated depthwise stacks, PReLU, global layer norm,
                transposed conv) over [batch, 1, samples]; samples a multiple of 8 (its stride): the
                padding for other lengths is a Python branch, which the export fixes at the traced length
  deepspeech    DeepSpeech (fully connected layers, bidirectional ReLU RNN) over [batch, 1, time, 40]
Each model also gets a batch-1 input in OUT_DIR/bench/NAME/test_data_set_0 for
`bench/compare.py --models-dir OUT_DIR/bench`. Every symbolic dim gets the range 0 to 480000
(`--default-dyn-dim`: 30 s of 16 kHz audio; the default 4096 is a quarter second). Prints one line per check and exits 1 if any failed.
"""
import os
import sys

import torch
from torchaudio import models as tam

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from sequence_sweep import command_line  # noqa: E402


def wav2vec2(layer_norm):
    return tam.wav2vec2_model(
        extractor_mode="layer_norm" if layer_norm else "group_norm", extractor_conv_layer_config=None,
        extractor_conv_bias=layer_norm, encoder_embed_dim=768, encoder_projection_dropout=0.1,
        encoder_pos_conv_kernel=128, encoder_pos_conv_groups=16, encoder_num_layers=2, encoder_num_heads=12,
        encoder_attention_dropout=0.1, encoder_ff_interm_features=3072, encoder_ff_interm_dropout=0.0,
        encoder_dropout=0.1, encoder_layer_norm_first=layer_norm, encoder_layer_drop=0.0, aux_num_out=32)


class First(torch.nn.Module):
    """The first result of a model that returns (output, lengths)."""

    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, *args):
        result = self.model(*args)
        return result[0] if isinstance(result, tuple) else result


class ConformerLengths(torch.nn.Module):
    """torchaudio's Conformer.forward with the padding mask sized by the input's time dim:
    its own mask is arange(int(max(lengths))), which the exporter traces as a constant (the
    exported length), so the ONNX model would only run at that length, in ONNX Runtime too."""

    def __init__(self):
        super().__init__()
        self.model = tam.Conformer(input_dim=80, num_heads=4, ffn_dim=256, num_layers=2, depthwise_conv_kernel_size=31)

    def forward(self, feats, lengths):
        mask = torch.arange(feats.shape[1]).unsqueeze(0) >= lengths.unsqueeze(1)
        x = feats.transpose(0, 1)
        for layer in self.model.conformer_layers:
            x = layer(x, mask)
        return x.transpose(0, 1)


def randn(*dims):
    return (torch.randn(*dims),)


# name: (constructor, input names, dynamic axes,
#        [inputs at the exported size, at a second size, at batch 1 for compare.py])
MODELS = {
    "wav2vec2": (lambda: First(wav2vec2(False)), ["audio"], {"audio": {0: "batch", 1: "samples"}},
                 lambda: [randn(2, 16000), randn(1, 23456), randn(1, 32000)]),
    "wav2vec2_ln": (lambda: First(wav2vec2(True)), ["audio"], {"audio": {0: "batch", 1: "samples"}},
                    lambda: [randn(2, 12000), randn(3, 7777), randn(1, 32000)]),
    "conformer": (ConformerLengths,
                  ["feats", "lengths"], {"feats": {0: "batch", 1: "time"}, "lengths": {0: "batch"}},
                  lambda: [(torch.randn(2, 50, 80), torch.tensor([50, 37])),
                           (torch.randn(3, 123, 80), torch.tensor([100, 123, 64])),
                           (torch.randn(1, 400, 80), torch.tensor([400]))]),
    "wav2letter": (lambda: tam.Wav2Letter(num_classes=40, input_type="mfcc", num_features=13), ["mfcc"],
                   {"mfcc": {0: "batch", 2: "time"}},
                   lambda: [randn(2, 13, 200), randn(1, 13, 333), randn(1, 13, 1000)]),
    "wav2letter_wave": (lambda: tam.Wav2Letter(num_classes=40, input_type="waveform"), ["audio"],
                        {"audio": {0: "batch", 2: "samples"}},
                        lambda: [randn(2, 1, 8000), randn(1, 1, 12345), randn(1, 1, 16000)]),
    "convtasnet": (lambda: tam.ConvTasNet(num_sources=2, enc_kernel_size=16, enc_num_feats=128, msk_kernel_size=3,
                                          msk_num_feats=64, msk_num_hidden_feats=128, msk_num_layers=4,
                                          msk_num_stacks=2),
                   ["mix"], {"mix": {0: "batch", 2: "samples"}},
                   lambda: [randn(1, 1, 8000), randn(2, 1, 5000), randn(1, 1, 16000)]),
    "deepspeech": (lambda: tam.DeepSpeech(n_feature=40, n_hidden=256, n_class=29), ["x"],
                   {"x": {0: "batch", 2: "time"}},
                   lambda: [randn(2, 1, 50, 40), randn(1, 1, 97, 40), randn(1, 1, 300, 40)]),
}


if __name__ == "__main__":
    # Audio lengths pass the default range's 4096: up to 30 s at 16 kHz, names kept.
    command_line(__doc__, MODELS, ["--default-dyn-dim", "{min:0,max:480000}"])
