#pragma once
// The smallest model the step and optimizer tests train: two linear layers (weights
// and biases: two AdamW parameter groups) around a ReLU and a dropout (masks keyed
// by sample position; p = 0 leaves it out of the arithmetic), 7 inputs, 3 classes.
#include "engine/nn/spec.hpp"

namespace tandem::testing {

inline ModelSpec tiny_mlp(double dropout = 0.0) {
  ModelSpec spec;
  spec.name = "tiny-mlp";
  spec.input = {7};
  spec.classes = 3;
  spec.layers = {{"linear", {{"out", 6}}, "test:1"},
                 {"relu", {}, "test:2"},
                 {"dropout", {{"p", dropout}}, "test:3"},
                 {"linear", {{"out", 3}}, "test:4"}};
  return spec;
}

}  // namespace tandem::testing
