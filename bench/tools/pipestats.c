// Dev aid (not part of vkgrad): build a compute pipeline from a SPIR-V file for each given set
// of specialization constants and print the driver's statistics for it
// (VK_KHR_pipeline_executable_properties: on NVIDIA "Register Count", "Binary Size", ...).
// Like mmstats.c, for any number of storage-buffer bindings and push-constant bytes.
// usage: pipestats shader.spv BINDINGS PUSH_BYTES label:w0,w1,... [label:...]
// build: cc -O1 -o pipestats bench/tools/pipestats.c -lvulkan
#include <vulkan/vulkan.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CK(x) do { VkResult r_ = (x); if (r_ != VK_SUCCESS) { fprintf(stderr, "%s failed: %d\n", #x, r_); exit(1); } } while (0)
#define MAXB 32

int main(int argc, char **argv) {
    if (argc < 5) { fprintf(stderr, "usage: %s shader.spv BINDINGS PUSH_BYTES label:w0,w1,...\n", argv[0]); return 2; }
    const uint32_t nbind = (uint32_t)atoi(argv[2]), push = (uint32_t)atoi(argv[3]);
    if (nbind < 1 || nbind > MAXB) { fprintf(stderr, "BINDINGS must be 1..%d\n", MAXB); return 2; }

    VkApplicationInfo app = {VK_STRUCTURE_TYPE_APPLICATION_INFO}; app.apiVersion = VK_API_VERSION_1_1;
    VkInstanceCreateInfo ici = {VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO}; ici.pApplicationInfo = &app;
    VkInstance inst; CK(vkCreateInstance(&ici, NULL, &inst));
    uint32_t n = 8; VkPhysicalDevice pds[8]; CK(vkEnumeratePhysicalDevices(inst, &n, pds));
    VkPhysicalDevice pd = pds[0];
    for (uint32_t i = 0; i < n; i++) {
        VkPhysicalDeviceProperties p; vkGetPhysicalDeviceProperties(pds[i], &p);
        if (p.deviceType == VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU) { pd = pds[i]; break; }
    }
    VkPhysicalDeviceProperties props; vkGetPhysicalDeviceProperties(pd, &props);
    printf("device: %s\n", props.deviceName);

    float prio = 1.0f;
    VkDeviceQueueCreateInfo qci = {VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO}; qci.queueCount = 1; qci.pQueuePriorities = &prio;
    VkPhysicalDevicePipelineExecutablePropertiesFeaturesKHR feat = {VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PIPELINE_EXECUTABLE_PROPERTIES_FEATURES_KHR};
    feat.pipelineExecutableInfo = VK_TRUE;
    const char *ext[] = {"VK_KHR_pipeline_executable_properties"};
    VkDeviceCreateInfo dci = {VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO}; dci.pNext = &feat;
    dci.queueCreateInfoCount = 1; dci.pQueueCreateInfos = &qci; dci.enabledExtensionCount = 1; dci.ppEnabledExtensionNames = ext;
    VkDevice dev; CK(vkCreateDevice(pd, &dci, NULL, &dev));
    PFN_vkGetPipelineExecutablePropertiesKHR getProps =
        (PFN_vkGetPipelineExecutablePropertiesKHR)vkGetDeviceProcAddr(dev, "vkGetPipelineExecutablePropertiesKHR");
    PFN_vkGetPipelineExecutableStatisticsKHR getStats =
        (PFN_vkGetPipelineExecutableStatisticsKHR)vkGetDeviceProcAddr(dev, "vkGetPipelineExecutableStatisticsKHR");

    FILE *f = fopen(argv[1], "rb");
    if (!f) { perror(argv[1]); return 1; }
    fseek(f, 0, SEEK_END); long sz = ftell(f); fseek(f, 0, SEEK_SET);
    uint32_t *code = malloc(sz);
    if (fread(code, 1, sz, f) != (size_t)sz) { fprintf(stderr, "short read\n"); return 1; }
    fclose(f);
    VkShaderModuleCreateInfo smci = {VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO}; smci.codeSize = sz; smci.pCode = code;
    VkShaderModule sm; CK(vkCreateShaderModule(dev, &smci, NULL, &sm));

    VkDescriptorSetLayoutBinding b[MAXB]; memset(b, 0, sizeof b);
    for (uint32_t i = 0; i < nbind; i++) {
        b[i].binding = i; b[i].descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER;
        b[i].descriptorCount = 1; b[i].stageFlags = VK_SHADER_STAGE_COMPUTE_BIT;
    }
    VkDescriptorSetLayoutCreateInfo dl = {VK_STRUCTURE_TYPE_DESCRIPTOR_SET_LAYOUT_CREATE_INFO}; dl.bindingCount = nbind; dl.pBindings = b;
    VkDescriptorSetLayout dsl; CK(vkCreateDescriptorSetLayout(dev, &dl, NULL, &dsl));
    VkPushConstantRange pcr = {VK_SHADER_STAGE_COMPUTE_BIT, 0, push};
    VkPipelineLayoutCreateInfo plci = {VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO};
    plci.setLayoutCount = 1; plci.pSetLayouts = &dsl;
    plci.pushConstantRangeCount = push ? 1 : 0; plci.pPushConstantRanges = &pcr;
    VkPipelineLayout pl; CK(vkCreatePipelineLayout(dev, &plci, NULL, &pl));

    for (int a = 4; a < argc; a++) {
        const char *colon = strchr(argv[a], ':');
        if (!colon) { fprintf(stderr, "bad argument %s\n", argv[a]); return 2; }
        char label[256]; size_t ll = (size_t)(colon - argv[a]); if (ll > 255) ll = 255;
        memcpy(label, argv[a], ll); label[ll] = 0;
        uint32_t words[64]; VkSpecializationMapEntry me[64]; uint32_t nw = 0;
        for (const char *s = colon + 1; *s && nw < 64; ) {
            words[nw] = (uint32_t)strtoul(s, (char **)&s, 10);
            me[nw].constantID = nw; me[nw].offset = 4 * nw; me[nw].size = 4; nw++;
            if (*s == ',') s++;
        }
        VkSpecializationInfo si = {nw, me, 4 * nw, words};
        VkComputePipelineCreateInfo cpci = {VK_STRUCTURE_TYPE_COMPUTE_PIPELINE_CREATE_INFO};
        cpci.flags = VK_PIPELINE_CREATE_CAPTURE_STATISTICS_BIT_KHR;
        cpci.stage.sType = VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO; cpci.stage.stage = VK_SHADER_STAGE_COMPUTE_BIT;
        cpci.stage.module = sm; cpci.stage.pName = "main"; cpci.stage.pSpecializationInfo = &si; cpci.layout = pl;
        VkPipeline p; CK(vkCreateComputePipelines(dev, VK_NULL_HANDLE, 1, &cpci, NULL, &p));
        VkPipelineInfoKHR pi = {VK_STRUCTURE_TYPE_PIPELINE_INFO_KHR}; pi.pipeline = p;
        uint32_t ne = 0; CK(getProps(dev, &pi, &ne, NULL));
        VkPipelineExecutablePropertiesKHR ep[8];
        for (int i = 0; i < 8; i++) { memset(&ep[i], 0, sizeof ep[i]); ep[i].sType = VK_STRUCTURE_TYPE_PIPELINE_EXECUTABLE_PROPERTIES_KHR; }
        if (ne > 8) ne = 8;
        CK(getProps(dev, &pi, &ne, ep));
        printf("%s:", label);
        for (uint32_t e = 0; e < ne; e++) {
            VkPipelineExecutableInfoKHR ei = {VK_STRUCTURE_TYPE_PIPELINE_EXECUTABLE_INFO_KHR}; ei.pipeline = p; ei.executableIndex = e;
            uint32_t ns = 0; CK(getStats(dev, &ei, &ns, NULL));
            VkPipelineExecutableStatisticKHR st[64];
            for (int i = 0; i < 64; i++) { memset(&st[i], 0, sizeof st[i]); st[i].sType = VK_STRUCTURE_TYPE_PIPELINE_EXECUTABLE_STATISTIC_KHR; }
            if (ns > 64) ns = 64;
            CK(getStats(dev, &ei, &ns, st));
            for (uint32_t i = 0; i < ns; i++) {
                switch (st[i].format) {
                case VK_PIPELINE_EXECUTABLE_STATISTIC_FORMAT_BOOL32_KHR: printf(" %s=%u;", st[i].name, st[i].value.b32); break;
                case VK_PIPELINE_EXECUTABLE_STATISTIC_FORMAT_INT64_KHR: printf(" %s=%lld;", st[i].name, (long long)st[i].value.i64); break;
                case VK_PIPELINE_EXECUTABLE_STATISTIC_FORMAT_UINT64_KHR: printf(" %s=%llu;", st[i].name, (unsigned long long)st[i].value.u64); break;
                case VK_PIPELINE_EXECUTABLE_STATISTIC_FORMAT_FLOAT64_KHR: printf(" %s=%g;", st[i].name, st[i].value.f64); break;
                default: break;
                }
            }
        }
        printf("\n");
        fflush(stdout);
        vkDestroyPipeline(dev, p, NULL);
    }
    return 0;
}
