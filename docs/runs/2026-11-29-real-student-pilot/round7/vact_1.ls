total 1208
-rw------- 1 root root  23568 Nov 30 03:24 v_act_heldout.safetensors
-rw------- 1 root root 541024 Nov 30 03:24 v_act_pair_features.safetensors
-rw------- 1 root root  23544 Nov 30 03:24 v_act_placebo.safetensors
-rw------- 1 root root  23624 Nov 30 03:24 v_act.safetensors
-rw------- 1 root root  23568 Nov 30 03:24 v_grad_heldout.safetensors
-rw------- 1 root root 541024 Nov 30 03:24 v_grad_pair_features.safetensors
-rw------- 1 root root  23544 Nov 30 03:24 v_grad_placebo.safetensors
-rw------- 1 root root  23624 Nov 30 03:24 v_grad.safetensors
