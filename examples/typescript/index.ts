// The whole TPU slicing stack as one component of the gke-tpu-slicing package (docs/package.md). The inputs
// are the Python program's configuration keys, camelCase, in the same tree; `project` is gcp:project.
import * as pulumi from "@pulumi/pulumi";
import * as tpu from "@pulumi/gke-tpu-slicing";

const config = new pulumi.Config();

const stack = new tpu.TpuSlicingStack("tpu", {
    project: config.require("projectId"),
    zone: "us-central1-ai1a",
    cluster: {
        deletionProtection: false,
        controlPlane: { privateEndpoint: true, dnsEndpoint: true },
    },
    tpu: {
        cubes: 2,
        reservation: { name: config.require("reservation"), block: "block-0" },
    },
    demos: { subslicing: { enabled: true }, superslicing: { enabled: false } },
    serving: { enabled: true, weightsBucket: config.require("weightsBucket") },
    observability: { notifyNobody: true },
    // A Pulumi secret stays one inside the component (`pulumi config set --secret hfToken ...`).
    hfToken: config.getSecret("hfToken"),
});

export const clusterName = stack.clusterName;
export const credentialsCommand = stack.credentialsCommand;
export const verifyCommand = stack.verifyCommand;
// Read back by the next update, under this name, to roll a smaller serving role beside the running one.
export const servingShape = stack.servingShape;
