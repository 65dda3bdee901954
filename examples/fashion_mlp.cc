// fashion_mlp: 784-256-128-10 with relu hidden layers and a softmax output
// trained with cross-entropy, as Fluid's MNIST MLP examples build it.
#include "common/api/layers.h"
#include "examples/model_zoo.h"

namespace oar {

ModelSpec FashionMlpSpec() {
  ModelSpec spec;
  spec.name = "fashion_mlp";
  spec.description = "MLP 784-256-128-10 (relu, softmax cross-entropy) on Fashion-MNIST";
  spec.dataset = "fashion-mnist";
  spec.build = [] {
    BuiltModel m;
    Var x = layers::data("x", {784});
    Var label = layers::data("label", {1}, DataType::kInt64);
    Var h1 = layers::fc(x, 256, "relu");
    Var h2 = layers::fc(h1, 128, "relu");
    m.prediction = layers::fc(h2, 10, "softmax");
    m.loss = layers::mean(layers::cross_entropy(m.prediction, label));
    m.accuracy = layers::accuracy(m.prediction, label);
    m.feeds = {x, label};
    return m;
  };
  return spec;
}

}  // namespace oar
