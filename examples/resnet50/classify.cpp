// The deployment guide's C++ inference, with Kiln's C++ API (kiln.hpp over the stable C API):
// read an image with OpenCV, preprocess it as the guide does, parse and compile ResNet-50, run,
// print the top-5 classes.
//
//     classify resnet50.onnx image.png [image2.png ...] [--target cpu]
//
// Prints one line per image, `IMAGE: index:score name, ...`, as classify.py does, so the two can be
// compared line by line.
#include <kiln/kiln.hpp>

#include <opencv2/dnn.hpp>
#include <opencv2/imgcodecs.hpp>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <numeric>
#include <string>
#include <vector>

namespace {

std::vector<std::string> read_lines(const std::string& path) {
    std::vector<std::string> lines;
    std::ifstream in(path);
    for (std::string line; std::getline(in, line);) lines.push_back(line);
    return lines;
}

std::string folder_of(const std::string& path) {
    auto slash = path.find_last_of('/');
    return slash == std::string::npos ? "." : path.substr(0, slash);
}

std::string base_name(const std::string& path) {
    auto slash = path.find_last_of('/');
    return slash == std::string::npos ? path : path.substr(slash + 1);
}

}  // namespace

int main(int argc, char** argv) {
    std::vector<std::string> images;
    std::string model_path, target_name = "cpu";
    for (int i = 1; i < argc; ++i) {
        std::string a = argv[i];
        if (a == "--target" && i + 1 < argc) target_name = argv[++i];
        else if (model_path.empty()) model_path = a;
        else images.push_back(a);
    }
    if (model_path.empty() || images.empty()) {
        std::fprintf(stderr, "usage: classify resnet50.onnx image.png [...] [--target cpu]\n");
        return 2;
    }
    try {
        namespace k = kiln::api;
        // The guide fixes the batch at parse time (map_input_dims); the model's batch is symbolic.
        k::program model = k::parse_onnx(model_path, k::onnx_options().input_dims("input", {1, 3, 224, 224}));
        model.compile(k::target(target_name), k::compile_options().offload_copy(true).device_id(0));
        const std::string input = model.input_names().at(0);
        const auto classes = read_lines(folder_of(model_path) + "/imagenet_classes.txt");

        for (const auto& path : images) {
            cv::Mat image = cv::imread(path);
            if (image.empty()) {
                std::fprintf(stderr, "cannot read image %s\n", path.c_str());
                return 1;
            }
            cv::Mat blob = cv::dnn::blobFromImage(image, 1.0 / 127.5, cv::Size(224, 224),
                                                  cv::Scalar(127.5, 127.5, 127.5), /*swapRB=*/true);
            // Borrow OpenCV's buffer: no copy; blob outlives the run.
            k::shape shape(KILN_TYPE_FLOAT32, {1, 3, 224, 224});
            auto arg = k::argument::wrap(shape, blob.ptr<float>(), blob.total() * sizeof(float));
            auto logits = model.run({{input, arg}}).at(0).to_vector<float>();

            std::vector<std::size_t> order(logits.size());
            std::iota(order.begin(), order.end(), 0);
            std::partial_sort(order.begin(), order.begin() + 5, order.end(),
                              [&](std::size_t a, std::size_t b) { return logits[a] > logits[b]; });
            std::printf("%s: ", base_name(path).c_str());
            for (int r = 0; r < 5; ++r) {
                std::size_t c = order[r];
                std::printf("%s%zu:%.3f%s%s", r ? ", " : "", c, logits[c], c < classes.size() ? " " : "",
                            c < classes.size() ? classes[c].c_str() : "");
            }
            std::printf("\n");
        }
    } catch (const kiln::api::error& e) {
        std::fprintf(stderr, "kiln error (status %d): %s\n", static_cast<int>(e.status()), e.what());
        return 1;
    }
    return 0;
}
