#include "engine/nn/optimizer.hpp"

#include <cmath>

#include "engine/core/error.hpp"
#include "engine/nn/adamw.hpp"
#include "engine/nn/model.hpp"
#include "engine/nn/sgd.hpp"

namespace tandem {

std::unique_ptr<Optimizer> make_optimizer(Device& dev, const Model& model, const OptimizerConfig& cfg) {
  if (cfg.name == "sgd") return std::make_unique<Sgd>(dev, model.param_count(), cfg);
  if (cfg.name == "adamw") return std::make_unique<AdamW>(dev, model, cfg);
  TANDEM_FAIL_HINT("set optimizer = 'sgd' or 'adamw'", "unknown optimizer '", cfg.name, "'");
}

double gradient_scale(double grad_sq, double predictions, double max_norm, double* norm) {
  TANDEM_CHECK(predictions > 0, "optimizer step over ", predictions, " predictions");
  const double scale = 1.0 / predictions;
  const double mean_norm = std::sqrt(grad_sq) * scale;
  if (norm) *norm = mean_norm;
  if (max_norm <= 0.0 || !std::isfinite(mean_norm)) return scale;
  const double coef = max_norm / (mean_norm + 1e-6);
  return coef < 1.0 ? scale * coef : scale;
}

}  // namespace tandem
