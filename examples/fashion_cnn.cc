// fashion_cnn: Fluid's recognize_digits convolutional network —
// conv5x5(20)+relu+maxpool2, batch_norm, conv5x5(50)+relu+maxpool2 — with a
// second batch_norm, "same" padding (2) on both convolutions as TensorFlow's
// reference net,
// a 256-unit relu layer with dropout before the 10-way softmax, and a
// learning rate decayed per epoch: without them the net tops out near 0.90
// on Fashion-MNIST in five epochs.
#include "common/api/layers.h"
#include "common/api/learning_rate_scheduler.h"
#include "examples/model_zoo.h"

namespace oar {

ModelSpec FashionCnnSpec() {
  ModelSpec spec;
  spec.name = "fashion_cnn";
  spec.description =
      "2x (conv5x5 pad 2 + relu + maxpool2 + batch_norm), fc 256 relu + dropout, fc 10 softmax, on Fashion-MNIST";
  spec.dataset = "fashion-mnist";
  spec.build = [] {
    BuiltModel m;
    Var img = layers::data("img", {1, 28, 28});
    Var label = layers::data("label", {1}, DataType::kInt64);
    Var c1 = nets::simple_img_conv_pool(img, 20, 5, 2, 2, 0, "max", false, 1, 2, 1, 1, {}, {}, "relu");
    c1 = layers::batch_norm(c1);
    Var c2 = nets::simple_img_conv_pool(c1, 50, 5, 2, 2, 0, "max", false, 1, 2, 1, 1, {}, {}, "relu");
    c2 = layers::batch_norm(c2);
    Var hidden = layers::dropout(layers::fc(c2, 256, "relu"), 0.3f, false, -1, "", "upscale_in_train");
    m.prediction = layers::fc(hidden, 10, "softmax");
    m.loss = layers::mean(layers::cross_entropy(m.prediction, label));
    m.accuracy = layers::accuracy(m.prediction, label);
    m.feeds = {img, label};
    return m;
  };
  // The rate falls to 0.6× after every epoch: the last epochs settle instead
  // of bouncing around a minimum.
  spec.learning_rate = [](float base_lr, int64_t steps_per_epoch) {
    return layers::exponential_decay(base_lr, steps_per_epoch, 0.6f, /*staircase=*/true);
  };
  return spec;
}

}  // namespace oar
